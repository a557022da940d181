import { sql } from 'drizzle-orm';
import { bigint, boolean, check, index, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
const micros = (name: string) => bigint(name, { mode: 'bigint' });

/** One wallet per user, in the site currency; the balance always equals the sum of its transactions. */
export const wallets = pgTable('wallets', {
  // No foreign key to accounts' users: billing owns only its own tables (DESIGN §1).
  userId: text('user_id').primaryKey(),
  currency: text('currency').notNull(),
  balanceMicros: micros('balance_micros').notNull(),
  createdAt: ts('created_at').notNull().defaultNow(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

/**
 * Quotas of a wallet's balance granted to serving processes (online charging, as in RFC 4006
 * credit control): a process admits requests against its own grant with no database round trip.
 * Granting locks the wallet row and never grants more than the balance minus the other live
 * grants; a usage debit consumes its process's grant in the same transaction. A grant whose
 * process stopped renewing it expires. At most one live grant per wallet holds `margin`: the one
 * request allowed to cross zero.
 */
export const walletGrants = pgTable(
  'wallet_grants',
  {
    userId: text('user_id').notNull(),
    /** The process holding the grant (a random id per process). */
    holder: text('holder').notNull(),
    amountMicros: micros('amount_micros').notNull(),
    margin: boolean('margin').notNull(),
    /** Bumped by every change, so the holder applies answers in the order they happened. */
    version: bigint('version', { mode: 'number' }).notNull(),
    expiresAt: ts('expires_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.holder] }), index('wallet_grants_holder_idx').on(t.holder)],
);

/** Append-only ledger. `reference` makes every write idempotent (usage:<request>, payment:<id>, …). */
export const walletTransactions = pgTable(
  'wallet_transactions',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    type: text('type').notNull(),
    amountMicros: micros('amount_micros').notNull(),
    currency: text('currency').notNull(),
    description: text('description').notNull(),
    reference: text('reference').notNull(),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('wallet_transactions_reference_key').on(t.reference),
    index('wallet_transactions_user_created_idx').on(t.userId, t.createdAt, t.id),
    check('wallet_transactions_type_check', sql`${t.type} in ('topup', 'usage', 'adjustment')`),
  ],
);

/** Top-ups. pending → paid | failed | expired; paid is final; money received is always credited. */
export const payments = pgTable(
  'payments',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    /** The account that started it (an organization's member paying its wallet); null for payments made before this was kept. */
    createdBy: text('created_by'),
    provider: text('provider').notNull(),
    amountMicros: micros('amount_micros').notNull(),
    currency: text('currency').notNull(),
    status: text('status').notNull(),
    /** The provider's transaction id once paid (Stripe payment intent, WeChat transaction_id, Alipay trade_no). */
    providerReference: text('provider_reference'),
    /** The provider's order id when it issues one at creation (Stripe Checkout session id). */
    providerOrderId: text('provider_order_id'),
    redirectUrl: text('redirect_url'),
    qrCodeUrl: text('qr_code_url'),
    idempotencyKey: text('idempotency_key'),
    requestHash: text('request_hash'),
    /** What the provider reported as paid when it did not match the order (recorded, never credited). */
    mismatchAmountMicros: micros('mismatch_amount_micros'),
    mismatchCurrency: text('mismatch_currency'),
    /** What the payment's refunds and disputes hold back (payment_refunds whose money is out); the status stays paid. */
    refundedAmountMicros: micros('refunded_amount_micros').notNull().default(sql`0`),
    createdAt: ts('created_at').notNull(),
    expiresAt: ts('expires_at').notNull(),
    paidAt: ts('paid_at'),
    updatedAt: ts('updated_at').notNull(),
    /** Last time the provider's query-order API was asked (throttles polling). */
    checkedAt: ts('checked_at'),
  },
  (t) => [
    uniqueIndex('payments_provider_reference_key').on(t.provider, t.providerReference),
    uniqueIndex('payments_user_idempotency_key').on(t.userId, t.idempotencyKey),
    index('payments_user_created_idx').on(t.userId, t.createdAt, t.id),
    index('payments_pending_expiry_idx').on(t.expiresAt).where(sql`${t.status} = 'pending'`),
    // The recheck of failed and expired payments scans only these, by age.
    index('payments_closed_created_idx').on(t.createdAt).where(sql`${t.status} in ('failed', 'expired')`),
    check('payments_status_check', sql`${t.status} in ('pending', 'paid', 'failed', 'expired')`),
  ],
);

/**
 * Refunds and disputes of paid payments, one row each, whoever started them (an admin through
 * POST /api/admin/payments/{id}/refund, or the provider: a dashboard refund, a chargeback). Every
 * change of a row happens under its payment's row lock, with the ledger entries it causes: the
 * debit `refund:<id>` when its money goes out, the credit `refund-reversal:<id>` if it comes back
 * (a refund the provider refused or that failed, a dispute won). The provider's own id is unique,
 * so a replayed or reordered notification finds the row it already made.
 */
export const paymentRefunds = pgTable(
  'payment_refunds',
  {
    id: text('id').primaryKey(),
    paymentId: text('payment_id').notNull(),
    userId: text('user_id').notNull(),
    provider: text('provider').notNull(),
    /** refund | dispute */
    kind: text('kind').notNull(),
    /** admin (asked for through cpd) | provider (started at the provider) */
    source: text('source').notNull(),
    amountMicros: micros('amount_micros').notNull(),
    /** Refunds: pending → succeeded | failed (succeeded → failed when the provider says so). Disputes: open → won | lost. */
    status: text('status').notNull(),
    /** Stripe re_… / dp_…, WeChat Pay refund_id, Alipay `<trade_no>:<out_request_no>`; null until the provider has answered. */
    providerRefundId: text('provider_refund_id'),
    reason: text('reason'),
    /** Why the provider refused or failed it, in its words. */
    failure: text('failure'),
    idempotencyKey: text('idempotency_key'),
    requestHash: text('request_hash'),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
    /** Last time the provider was asked about this pending refund (throttles the sweeper). */
    checkedAt: ts('checked_at'),
  },
  (t) => [
    uniqueIndex('payment_refunds_provider_refund_key').on(t.provider, t.providerRefundId),
    uniqueIndex('payment_refunds_idempotency_key').on(t.paymentId, t.idempotencyKey),
    index('payment_refunds_payment_idx').on(t.paymentId, t.createdAt),
    index('payment_refunds_pending_idx').on(t.createdAt).where(sql`${t.status} = 'pending'`),
    check('payment_refunds_kind_check', sql`${t.kind} in ('refund', 'dispute')`),
    check('payment_refunds_source_check', sql`${t.source} in ('admin', 'provider')`),
    check('payment_refunds_status_check', sql`${t.status} in ('pending', 'succeeded', 'failed', 'open', 'won', 'lost')`),
    check('payment_refunds_amount_check', sql`${t.amountMicros} > 0`),
  ],
);

/** China-site invoices, at most one per payment. */
export const invoices = pgTable(
  'invoices',
  {
    id: text('id').primaryKey(),
    paymentId: text('payment_id').notNull(),
    userId: text('user_id').notNull(),
    title: text('title').notNull(),
    taxId: text('tax_id'),
    amountMicros: micros('amount_micros').notNull(),
    currency: text('currency').notNull(),
    status: text('status').notNull(),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [uniqueIndex('invoices_payment_key').on(t.paymentId), index('invoices_user_created_idx').on(t.userId, t.createdAt)],
);

/**
 * Redemption codes: prepaid amounts sold as codes. Only the code's SHA-256 is kept (it is shown
 * once, at creation); `prefix` names it in lists and in the top-up's description. Redeeming sets
 * redeemed_by in the same transaction that credits the wallet, guarded by `redeemed_by is null`,
 * so a code credits once across replicas.
 */
export const redemptionCodes = pgTable(
  'redemption_codes',
  {
    id: text('id').primaryKey(),
    batchId: text('batch_id').notNull(),
    prefix: text('prefix').notNull(),
    codeHash: text('code_hash').notNull().unique(),
    amountMicros: micros('amount_micros').notNull(),
    currency: text('currency').notNull(),
    note: text('note'),
    expiresAt: ts('expires_at'),
    disabledAt: ts('disabled_at'),
    redeemedBy: text('redeemed_by'),
    redeemedAt: ts('redeemed_at'),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [index('redemption_codes_batch_idx').on(t.batchId)],
);

/** Failed redemptions per user: the exact throttle (10 an hour) counts them under an advisory lock. */
export const redemptionFailures = pgTable(
  'redemption_failures',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [index('redemption_failures_user_created_idx').on(t.userId, t.createdAt)],
);

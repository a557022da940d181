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

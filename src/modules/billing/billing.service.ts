/**
 * The billing service other modules use (through index.ts): debits for usage, credits, balances
 * and a cross-process balance-change signal. Payments, invoices and receipts hang off it.
 */
import type { PaymentProviderId } from '../../config';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { createGrants, type Grant } from './grants';
import { type AdjustmentInput, createAdjustments } from './adjustments';
import { createRedemption } from './redemption';
import { createInvoices } from './invoices.service';
import { createMoneyEvents, type MoneyEvent } from './events';
import { createLedger } from './ledger';
import { createNotifications } from './notifications';
import { createPayments, type PaymentsOptions } from './payments.service';
import { createProviders } from './providers';
import type { PaymentProvider } from './providers/provider';
import { createRefunds } from './refunds.service';
import { createSandboxCheckout } from './sandbox.checkout';
import { startSweeper } from './sweeper';
import { createWalletSignal } from './wallet-signal';

export interface DebitUsageInput {
  userId: string;
  /** Positive cost in micro-units; it is recorded as a negative `usage` amount. */
  amountMicros: bigint;
  /** Idempotency reference (for example the gateway request id): a replay debits nothing. */
  reference: string;
  description: string;
}

export interface CreditInput {
  userId: string;
  type: 'topup' | 'adjustment';
  /** Signed micro-units: an adjustment may be negative, a top-up must be positive. */
  amountMicros: bigint;
  reference: string;
  description: string;
}

export interface BillingOptions extends PaymentsOptions {
  /** Adapters by provider id instead of the configured ones (tests of a single adapter). */
  providers?: Map<PaymentProviderId, PaymentProvider>;
}

export function createBillingService(ctx: AppContext, opts: BillingOptions = {}) {
  const signal = createWalletSignal(ctx);
  const ledger = createLedger(ctx, signal);
  const grants = createGrants(ctx);
  const providers = opts.providers ?? createProviders(ctx);
  // Two kinds of money events: recorded in the money's own transaction (webhooks, `opts.events`)
  // and announced after it commits (mails, `onMoneyEvent`).
  const announcements = createMoneyEvents(ctx.log);
  const payments = createPayments(ctx, ledger, providers, opts, announcements);
  const refunds = createRefunds(ctx, ledger, providers, payments, { retryEveryMs: opts.recheckEveryMs, events: opts.events }, announcements);
  const notifications = createNotifications(ctx, providers, payments, refunds);
  const adjustments = createAdjustments(ledger);
  return {
    ledger,
    payments,
    /** Redemption codes: batches (admin) and redeeming one into a top-up. */
    redemption: createRedemption(ctx, ledger),
    /**
     * Refunds and disputes: `refund(paymentId, {amount?, reason, allowNegative?, idempotencyKey?},
     * {onCreated?})` (an admin refund; answers the payment row), `applyReports` (what providers
     * notify), `settlePending` (pending admin refunds asked about again; the sweeper runs it).
     */
    refunds,
    /** Provider notifications (the webhook route and the sandbox checkout's buttons). */
    notifications,
    invoices: createInvoices(ctx, payments, refunds, opts.events),
    /** The sandbox provider's checkout pages; null in live mode, where their routes do not exist. */
    sandbox: ctx.config.paymentMode === 'sandbox' ? createSandboxCheckout(ctx, notifications) : null,
    /**
     * Asks the payment's provider about it now and settles what it says (credits once if paid,
     * whatever its state); answers the payment row. The admin reconcile endpoint uses it.
     */
    reconcilePayment: (paymentId: string) => payments.reconcilePayment(paymentId),
    /** Expires due payments every intervalMs until shutdown (cpd serve: once a minute). */
    startSweeper: (intervalMs = 60_000) => startSweeper(ctx, payments, refunds, intervalMs),

    /**
     * Records a `usage` debit in the caller's transaction (or on its own when given the db).
     * Idempotent on `reference`; may take the balance below zero (delivered tokens are billed).
     */
    async debitUsage(on: DbOrTx, input: DebitUsageInput): Promise<{ transactionId: string; balanceMicros: bigint }> {
      if (input.amountMicros < 0n) throw new AppError('invalid', 'a usage debit takes a non-negative cost');
      const r = await ledger.apply(on, { ...input, type: 'usage', amountMicros: -input.amountMicros });
      return { transactionId: r.transactionId, balanceMicros: r.balanceMicros };
    },

    /**
     * One `usage` entry per element in ONE multi-row statement (the router's batches), in the
     * caller's transaction or on its own. Idempotent per reference; each wallet moves once by the
     * sum of its new entries, wallets locked in user-id order. Answers every named user's balance.
     */
    async debitUsageMany(on: DbOrTx, entries: DebitUsageInput[]): Promise<Map<string, bigint>> {
      if (entries.some((e) => e.amountMicros < 0n)) throw new AppError('invalid', 'a usage debit takes a non-negative cost');
      return (await ledger.applyUsageMany(on, entries)).balances;
    },

    /**
     * The router's usage batch, in the caller's transaction: debitUsageMany and the holder's wallet
     * grants lowered by the entries' amounts, both statements sent at once and run in that order
     * (wallet rows locked before grant rows, as when a grant is requested, so they cannot
     * deadlock). A replayed batch debits nothing but lowers the grants again: a grant may end
     * lower than it could be, which costs a renewal, never money. No NOTIFY at commit: the caller
     * calls `committed()` after its commit to announce the change. `firstTry`: see applyUsageMany
     * (a reference already written fails the batch with 23505; the caller replays without it).
     */
    async debitUsageBatch(
      tx: DbOrTx,
      entries: DebitUsageInput[],
      holder: string,
      opts: { firstTry?: boolean } = {},
    ): Promise<{ grants: Map<string, Grant>; committed: () => void }> {
      if (entries.some((e) => e.amountMicros < 0n)) throw new AppError('invalid', 'a usage debit takes a non-negative cost');
      const costs = new Map<string, bigint>();
      for (const e of entries) costs.set(e.userId, (costs.get(e.userId) ?? 0n) + e.amountMicros);
      const [, lowered] = await Promise.all([
        ledger.applyUsageMany(tx, entries, { announcedByCaller: true, firstTry: opts.firstTry }),
        grants.consume(tx, holder, costs),
      ]);
      return { grants: lowered, committed: () => ledger.announce(costs.keys()) };
    },

    /** Wallet grants for admission across processes (grants.ts). */
    grants: { request: grants.request, endMargin: grants.endMargin, giveBack: grants.giveBack, renewAll: grants.renewAll, releaseAll: grants.releaseAll },

    /** A top-up or adjustment, idempotent on `reference`; `applied` is false on a replay. */
    async credit(on: DbOrTx, input: CreditInput) {
      if (input.type === 'topup' && input.amountMicros <= 0n) throw new AppError('invalid', 'a top-up must be positive');
      return ledger.apply(on, input);
    },

    /**
     * An operator's signed `adjustment` (major units, ≤ 6 decimals, ≠ 0, reason 1..500 characters)
     * in the caller's transaction; idempotent on `idempotencyKey`. Answers {transaction, applied}.
     */
    adjust: (tx: DbOrTx, input: AdjustmentInput) => adjustments.adjust(tx, input),

    getBalanceMicros: (userId: string): Promise<bigint> => ledger.balance(userId),
    /** Balances of many wallets (a user without a wallet is absent: 0). */
    getBalancesMicros: (userIds: string[], on?: DbOrTx): Promise<Map<string, bigint>> => ledger.balances(userIds, on),

    /**
     * listener(userId) runs in this process whenever any process changes a wallet (NOTIFY
     * 'cpd_wallet'): at commit for credits, within a few milliseconds for debits; resync() after
     * the notification connection reconnected (any wallet may have changed). Resolves once listening.
     */
    onBalanceChange: (listener: (userId: string) => void, resync?: () => void): Promise<void> => signal.listen(listener, resync),

    /** listener(event) runs in this process after a payment it settled became paid or a refund succeeded (committed). */
    onMoneyEvent: (listener: (event: MoneyEvent) => void) => announcements.subscribe(listener),
  };
}

export type BillingService = ReturnType<typeof createBillingService>;

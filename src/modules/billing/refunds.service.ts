/**
 * Refunds and disputes of paid payments. An admin refund is recorded, debited (`adjustment` of
 * −amount, "Refund of payment <id>") and added to the payment's refunded amount in one
 * transaction under the payment's row lock, then asked of the provider with our refund id as its
 * idempotency key; a provider's refusal credits it back. Refunds and disputes started at the
 * provider arrive as notifications and are applied the same way (below zero allowed: the money
 * has gone). Every change of a refund happens under its payment's row lock and moves money only
 * on the transitions that hold it back or give it back, so a replayed or reordered notification,
 * an admin refund racing the provider's notice of it, or two refunds at once move money once.
 */
import { and, asc, eq, gt, inArray, isNull, lte, or, sql } from 'drizzle-orm';
import type { PaymentProviderId } from '../../config';
import type { AppContext } from '../../app-context';
import { sha256Hex } from '../../platform/crypto';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { exactMajorToMicros } from '../../platform/money';
import { checkReason } from './adjustments';
import { paymentRefunds, payments } from './billing.tables';
import { type MoneyAudit, type MoneyEvents, NO_MONEY_AUDIT } from './events';
import type { Ledger } from './ledger';
import { toMajor } from './money';
import { type BillingEvents, NO_EVENTS, type Payment, type Payments } from './payments.service';
import { type PaymentProvider, type RefundOutcome, RefundRefusedError, type RefundReport, type RefundRequest } from './providers';

export type PaymentRefund = typeof paymentRefunds.$inferSelect;
type RefundStatus = RefundReport['status'];

export interface RefundInput {
  /** Major units, > 0, at most 6 decimals (whole cents with a live provider); absent: what remains unrefunded. */
  amount?: number;
  reason: string;
  allowNegative?: boolean;
  idempotencyKey?: string;
}

export interface RefundsOptions {
  /** A pending admin refund is asked about at its provider again at most this often. */
  retryEveryMs?: number;
  /** payment.refunded is recorded with every refund or dispute debit. */
  events?: BillingEvents;
  /** An audit entry is recorded with every refund or dispute debit and every reversal of one. */
  audit?: MoneyAudit;
}

/**
 * Money a transaction moved for refunds: [provider, kind, out of the wallet or back in], counted
 * once it commits; and refunds it saw succeed, told (MoneyEvents) once it commits.
 */
type MoneyMoves = Array<[provider: string, kind: string, way: 'out' | 'back'] | [provider: string, kind: string, way: 'succeeded', refund: PaymentRefund, payment: Payment]>;

/** Statuses whose money is out of the wallet (held back from the payment). */
const HOLDS: readonly RefundStatus[] = ['pending', 'succeeded', 'open', 'lost'];
/** The moves a refund can make; anything else a provider reports about it is stale and ignored. */
const MOVES: Partial<Record<RefundStatus, readonly RefundStatus[]>> = {
  pending: ['succeeded', 'failed'],
  // A provider may report a refund failed after it succeeded (the bank sent it back).
  succeeded: ['failed'],
  open: ['won', 'lost'],
};

/** Live providers refund whole minor units (cents, fen). */
const MINOR_UNIT_MICROS = 10_000n;

export function createRefunds(
  ctx: AppContext,
  ledger: Ledger,
  providers: Map<PaymentProviderId, PaymentProvider>,
  paymentsService: Payments,
  opts: RefundsOptions = {},
  announce?: MoneyEvents,
) {
  const { db } = ctx.database;
  const { config, log } = ctx;
  const retryEveryMs = opts.retryEveryMs ?? 5 * 60_000;
  const events = opts.events ?? NO_EVENTS;
  const audit = opts.audit ?? NO_MONEY_AUDIT;

  /** Checks the request before anything is read: amount (when given) and reason. */
  function validate(input: RefundInput): { amountMicros: bigint | null; reason: string } {
    const reason = checkReason(input.reason);
    if (input.amount === undefined) return { amountMicros: null, reason };
    const amountMicros = exactMajorToMicros(input.amount);
    if (amountMicros === null || amountMicros <= 0n) throw new AppError('invalid', 'amount must be a positive number with at most 6 decimals');
    if (config.paymentMode === 'live' && amountMicros % MINOR_UNIT_MICROS !== 0n)
      throw new AppError('invalid', 'amount must have at most two decimals: providers refund whole cents');
    return { amountMicros, reason };
  }

  const lockPayment = async (tx: DbOrTx, id: string): Promise<Payment | undefined> =>
    (await tx.select().from(payments).where(eq(payments.id, id)).for('update'))[0];

  /**
   * An admin refund of a paid payment; answers the payment as it then is. `onCreated` runs in the
   * transaction that records and debits the refund (the caller's audit entry commits with it).
   * The same Idempotency-Key and body answer the same refund (a refused one: the same refusal);
   * another body is 409.
   */
  async function refund(paymentId: string, input: RefundInput, hooks: { onCreated?: (tx: DbOrTx, refund: PaymentRefund) => Promise<void> } = {}): Promise<Payment> {
    const { amountMicros, reason } = validate(input);
    const allowNegative = input.allowNegative === true;
    const requestHash = sha256Hex(`${amountMicros ?? 'rest'}|${reason}|${allowNegative}`);
    const moved: MoneyMoves = [];
    const outcome = await db.transaction(async (tx) => {
      const p = await lockPayment(tx, paymentId);
      if (!p) throw new AppError('not_found', 'payment not found');
      if (input.idempotencyKey !== undefined) {
        const [earlier] = await tx
          .select()
          .from(paymentRefunds)
          .where(and(eq(paymentRefunds.paymentId, p.id), eq(paymentRefunds.idempotencyKey, input.idempotencyKey)));
        if (earlier) return { replayed: true as const, refund: earlier, payment: p };
      }
      if (p.status !== 'paid') throw new AppError('conflict', `only a paid payment can be refunded; this one is ${p.status}`);
      if (!providers.has(p.provider as PaymentProviderId)) throw new AppError('conflict', `provider "${p.provider}" is not enabled on this site: refund it at the provider`);
      const remaining = p.amountMicros - p.refundedAmountMicros;
      if (remaining <= 0n) throw new AppError('conflict', 'nothing remains to refund on this payment');
      const amount = amountMicros ?? remaining;
      if (amount > remaining) throw new AppError('invalid', `amount must be at most ${toMajor(remaining)} ${p.currency} (what remains unrefunded)`);
      const balance = await ledger.lockedBalance(tx, p.userId);
      if (balance - amount < 0n && !allowNegative)
        throw new AppError('conflict', `the refund would take the balance (${toMajor(balance)} ${p.currency}) below zero; send allow_negative: true to allow it`);
      const now = ctx.clock.now();
      const [row] = await tx
        .insert(paymentRefunds)
        .values({
          id: newId('rfd'),
          paymentId: p.id,
          userId: p.userId,
          provider: p.provider,
          kind: 'refund',
          source: 'admin',
          amountMicros: amount,
          status: 'pending',
          reason,
          idempotencyKey: input.idempotencyKey ?? null,
          requestHash,
          createdAt: now,
          updatedAt: now,
          checkedAt: now,
        })
        .returning();
      await moneyOut(tx, p, row!, moved);
      await hooks.onCreated?.(tx, row!);
      return { replayed: false as const, refund: row!, payment: p };
    });
    if (outcome.replayed) {
      const earlier = outcome.refund;
      if (earlier.requestHash !== requestHash) throw new AppError('conflict', 'this Idempotency-Key was used for a different refund of this payment');
      if (earlier.status === 'failed' && earlier.source === 'admin') throw refused(earlier.failure);
      return (await reloadPayment(paymentId))!;
    }
    count(moved);
    await askProvider(outcome.payment, outcome.refund, 'refund');
    const after = await reloadRefund(outcome.refund.id);
    if (after.status === 'failed') throw refused(after.failure);
    return (await reloadPayment(paymentId))!;
  }

  const refused = (failure: string | null) =>
    new AppError('conflict', `the payment provider refused the refund (${failure ?? 'no reason given'}); nothing was refunded`);

  /**
   * Asks the provider to make (or about) one of our refunds and applies what it answers. A
   * refusal fails the refund (credited back); no answer leaves it pending for the sweeper.
   */
  async function askProvider(p: Payment, r: PaymentRefund, how: 'refund' | 'query-then-refund'): Promise<void> {
    const provider = providers.get(p.provider as PaymentProviderId);
    if (!provider) return;
    const request: RefundRequest = {
      refundId: r.id,
      paymentId: p.id,
      providerReference: p.providerReference,
      paymentAmountMicros: p.amountMicros,
      amountMicros: r.amountMicros,
      currency: p.currency,
      reason: r.reason ?? `Refund of payment ${p.id}`,
      providerRefundId: r.providerRefundId,
    };
    let outcome: RefundOutcome | null;
    try {
      outcome = how === 'query-then-refund' ? await provider.queryRefund(request) : null;
      outcome ??= await provider.refund(request);
    } catch (err) {
      if (!(err instanceof RefundRefusedError)) {
        log.warn({ err, payment_id: p.id, refund_id: r.id }, 'the provider did not answer a refund; it stays pending and is asked again');
        return;
      }
      log.warn({ payment_id: p.id, refund_id: r.id, reason: err.message }, 'the provider refused a refund; credited back');
      outcome = { status: 'failed', failure: err.message };
    }
    await underLock(p.id, (tx, locked, moved) => move(tx, locked, r.id, outcome.status, outcome, moved));
  }

  /**
   * Runs `fn` in a transaction holding the payment's row lock (every change of its refunds does);
   * the money moves it records are counted once that transaction has committed.
   */
  async function underLock(paymentId: string, fn: (tx: DbOrTx, p: Payment, moved: MoneyMoves) => Promise<void>) {
    const moved: MoneyMoves = [];
    await db.transaction(async (tx) => {
      const p = await lockPayment(tx, paymentId);
      if (!p) throw new AppError('not_found', 'payment not found');
      await fn(tx, p, moved);
    });
    count(moved);
  }

  /**
   * Moves one refund to `next` if that is a move it can make, recording the provider's id and
   * words; money comes back when a refund that held it stops holding it.
   */
  async function move(tx: DbOrTx, p: Payment, refundId: string, next: RefundStatus, from: { providerRefundId?: string; failure?: string }, moved: MoneyMoves) {
    const [r] = await tx.select().from(paymentRefunds).where(eq(paymentRefunds.id, refundId));
    if (!r) return;
    const moves = MOVES[r.status as RefundStatus]?.includes(next) ?? false;
    const providerRefundId = r.providerRefundId ?? from.providerRefundId ?? null;
    if (!moves && providerRefundId === r.providerRefundId) return;
    await tx
      .update(paymentRefunds)
      .set({
        status: moves ? next : r.status,
        providerRefundId,
        ...(moves && next === 'failed' ? { failure: from.failure ?? 'failed at the provider' } : {}),
        updatedAt: ctx.clock.now(),
      })
      .where(eq(paymentRefunds.id, r.id));
    if (moves && HOLDS.includes(r.status as RefundStatus) && !HOLDS.includes(next)) await moneyBack(tx, p, r, moved);
    if (moves && next === 'succeeded') moved.push([p.provider, r.kind, 'succeeded', r, p]);
    if (moves) log.debug({ payment_id: p.id, refund_id: r.id, from: r.status, to: next }, 'refund moved');
  }

  /** The debit of a refund or dispute, and the payment's refunded amount, in the caller's transaction. */
  async function moneyOut(tx: DbOrTx, p: Payment, r: PaymentRefund, moved: MoneyMoves) {
    await ledger.apply(tx, { userId: p.userId, type: 'adjustment', amountMicros: -r.amountMicros, reference: `refund:${r.id}`, description: `Refund of payment ${p.id}` });
    await tx
      .update(payments)
      .set({ refundedAmountMicros: sql`${payments.refundedAmountMicros} + ${r.amountMicros}`, updatedAt: ctx.clock.now() })
      .where(eq(payments.id, p.id));
    await events.record(tx, {
      userId: p.userId,
      type: 'payment.refunded',
      data: {
        payment_id: p.id,
        refund_id: r.id,
        kind: r.kind,
        amount: toMajor(r.amountMicros),
        currency: p.currency,
        refunded_amount: toMajor(p.refundedAmountMicros + r.amountMicros),
      },
    });
    // No member acts in a refund: the platform's operator or the provider does (the operator's own entry names them).
    await audit.record(tx, {
      walletId: p.userId,
      action: 'payment.refund',
      actorId: null,
      details: { payment_id: p.id, refund_id: r.id, kind: r.kind, source: r.source, amount: toMajor(r.amountMicros), currency: p.currency },
    });
    moved.push([p.provider, r.kind, 'out']);
  }

  async function moneyBack(tx: DbOrTx, p: Payment, r: PaymentRefund, moved: MoneyMoves) {
    const description = r.kind === 'dispute' ? `Dispute of payment ${p.id} won: refund reversed` : `Refund of payment ${p.id} failed at the provider: reversed`;
    await ledger.apply(tx, { userId: p.userId, type: 'adjustment', amountMicros: r.amountMicros, reference: `refund-reversal:${r.id}`, description });
    await audit.record(tx, {
      walletId: p.userId,
      action: 'payment.refund_reversed',
      actorId: null,
      details: { payment_id: p.id, refund_id: r.id, kind: r.kind, amount: toMajor(r.amountMicros), currency: p.currency },
    });
    await tx
      .update(payments)
      .set({ refundedAmountMicros: sql`${payments.refundedAmountMicros} - ${r.amountMicros}`, updatedAt: ctx.clock.now() })
      .where(eq(payments.id, p.id));
    moved.push([p.provider, r.kind, 'back']);
  }

  /**
   * Applies what a verified notification reports about refunds and disputes. A report about a
   * payment not paid yet (its paid notice comes later) first settles the payment from the
   * provider's order query; if it is still not paid, 409 and the provider sends it again.
   */
  async function applyReports(providerId: PaymentProviderId, reports: RefundReport[]): Promise<void> {
    for (const report of reports) {
      const [found] = await db.select().from(payments).where(and(eq(payments.id, report.paymentId), eq(payments.provider, providerId)));
      if (!found) throw new AppError('not_found', 'payment not found');
      if (found.status !== 'paid' && (await paymentsService.reconcilePayment(found.id)).status !== 'paid')
        throw new AppError('conflict', 'a refund was reported for a payment that is not paid yet');
      await underLock(found.id, (tx, p, moved) => applyReport(tx, p, report, moved));
    }
  }

  async function applyReport(tx: DbOrTx, p: Payment, report: RefundReport, moved: MoneyMoves) {
    if (report.currency && report.currency !== p.currency) {
      log.error({ payment_id: p.id, report }, 'the provider reported a refund in another currency than the payment; not applied');
      return;
    }
    const [byProviderId] = await tx
      .select()
      .from(paymentRefunds)
      .where(and(eq(paymentRefunds.provider, p.provider), eq(paymentRefunds.providerRefundId, report.providerRefundId)));
    const [known] = byProviderId
      ? [byProviderId]
      : report.refundId
        ? await tx.select().from(paymentRefunds).where(and(eq(paymentRefunds.id, report.refundId), eq(paymentRefunds.paymentId, p.id)))
        : [];
    if (known) {
      if (known.paymentId !== p.id) return log.error({ payment_id: p.id, refund_id: known.id }, 'the provider reported a refund of another payment under this id');
      if (known.amountMicros !== report.amountMicros)
        log.warn({ refund_id: known.id, ours: String(known.amountMicros), reported: String(report.amountMicros) }, 'the provider reported another amount for a refund');
      return move(tx, p, known.id, report.status, { providerRefundId: report.providerRefundId }, moved);
    }
    // Started at the provider. A refund that failed never held money; a dispute closed as won
    // before its opening reached us is recorded without moving money, so the opening changes nothing.
    if (report.status === 'failed') return;
    const now = ctx.clock.now();
    const [row] = await tx
      .insert(paymentRefunds)
      .values({
        id: newId('rfd'),
        paymentId: p.id,
        userId: p.userId,
        provider: p.provider,
        kind: report.kind,
        source: 'provider',
        amountMicros: report.amountMicros,
        status: report.status,
        providerRefundId: report.providerRefundId,
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    if (report.status === 'won') return;
    if (p.refundedAmountMicros + report.amountMicros > p.amountMicros)
      log.error({ payment_id: p.id, refund_id: row!.id }, 'the provider refunded more than the payment: applied as reported');
    await moneyOut(tx, p, row!, moved);
    if (report.status === 'succeeded') moved.push([p.provider, row!.kind, 'succeeded', row!, p]);
    log.info({ payment_id: p.id, refund_id: row!.id, kind: report.kind, status: report.status }, 'refund started at the provider applied');
  }

  /**
   * Asks the providers again about admin refunds still pending (no answer came, or the provider
   * is still sending the money): each at most every retryEveryMs, within PAYMENT_RECHECK_WINDOW.
   * A refund the provider does not know is asked for again (idempotent on our refund id).
   * `paymentId` with `force`: that payment's pending refunds now (the admin reconcile).
   */
  async function settlePending(scope: { paymentId?: string; force?: boolean; limit?: number } = {}): Promise<number> {
    const now = ctx.clock.now().getTime();
    const rows = await db
      .select()
      .from(paymentRefunds)
      .where(
        and(
          eq(paymentRefunds.status, 'pending'),
          eq(paymentRefunds.source, 'admin'),
          scope.paymentId ? eq(paymentRefunds.paymentId, scope.paymentId) : gt(paymentRefunds.createdAt, new Date(now - config.paymentRecheckWindowMs)),
          scope.force ? undefined : or(isNull(paymentRefunds.checkedAt), lte(paymentRefunds.checkedAt, new Date(now - retryEveryMs))),
        ),
      )
      .orderBy(asc(paymentRefunds.createdAt))
      .limit(scope.limit ?? 100);
    for (const r of rows) {
      await db.update(paymentRefunds).set({ checkedAt: ctx.clock.now() }).where(eq(paymentRefunds.id, r.id));
      const p = await reloadPayment(r.paymentId);
      if (p) await askProvider(p, r, 'query-then-refund');
    }
    return rows.length;
  }

  /** The refunds and disputes that hold money back from one payment (its receipt lists them). */
  const heldOf = (paymentId: string) =>
    db
      .select()
      .from(paymentRefunds)
      .where(and(eq(paymentRefunds.paymentId, paymentId), inArray(paymentRefunds.status, [...HOLDS])))
      .orderBy(asc(paymentRefunds.createdAt));

  /**
   * cpd_payments_total{status}: refunds and disputes whose money went out (refunded, disputed) or
   * came back (refund_failed, dispute_won), counted after their transaction committed.
   */
  function count(moved: MoneyMoves) {
    for (const m of moved) {
      const [provider, kind, way] = m;
      if (m[2] === 'succeeded') {
        const [, , , r, p] = m;
        if (kind === 'refund') announce?.emit({ kind: 'refund_succeeded', userId: r.userId, paymentId: p.id, refundId: r.id, amountMicros: r.amountMicros, currency: p.currency });
        continue;
      }
      paymentsService.count(provider, way === 'out' ? (kind === 'dispute' ? 'disputed' : 'refunded') : kind === 'dispute' ? 'dispute_won' : 'refund_failed');
    }
  }

  const reloadPayment = async (id: string) => (await db.select().from(payments).where(eq(payments.id, id)))[0];
  const reloadRefund = async (id: string) => (await db.select().from(paymentRefunds).where(eq(paymentRefunds.id, id)))[0]!;

  return { refund, applyReports, settlePending, heldOf };
}

export type Refunds = ReturnType<typeof createRefunds>;

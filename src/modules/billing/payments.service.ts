/**
 * Top-ups: create an order at the provider, then settle it from a verified notification, an order
 * query (polling fallback) or expiry. Settling takes the payment row lock; pending → paid and the
 * wallet credit (reference `payment:<id>`) commit together, so a payment is credited exactly once
 * whatever replays, reorderings or races happen. Money received is never lost: a paid report is
 * honoured even after the payment expired or failed.
 */
import { and, asc, desc, eq, gt, inArray, isNull, lt, lte, or, sql } from 'drizzle-orm';
import type { PaymentProviderId } from '../../config';
import type { AppContext } from '../../app-context';
import { sha256Hex } from '../../platform/crypto';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { HotCounter } from '../../platform/metrics/hot';
import { payments } from './billing.tables';
import { decodeCursor, olderThan, page } from '../../platform/cursor';
import type { MoneyEvents } from './events';
import type { Ledger } from './ledger';
import { centsAmountToMicros, toMajor } from './money';
import type { PaymentProvider, ProviderReport } from './providers';
import { type RefundView, refundViewsOf } from './refunds.views';

export const PAYMENT_TTL_MS = 30 * 60_000;
export const PAYMENT_STATUSES = ['pending', 'paid', 'failed', 'expired'] as const;
const KNOWN_PROVIDERS: readonly string[] = ['card', 'chat_wallet', 'app_wallet'];

export type Payment = typeof payments.$inferSelect;

/**
 * Where billing records what customers are notified of (the webhooks module's event sink, given by
 * the composition root), in the transaction that moved the money: it commits or rolls back with it.
 */
export interface BillingEvents {
  record(on: DbOrTx, event: { userId: string; type: 'payment.paid' | 'payment.refunded' | 'invoice.issued'; data: Record<string, unknown> }): Promise<unknown>;
}

export const NO_EVENTS: BillingEvents = { record: async () => null };

export interface PaymentsOptions {
  /** Events recorded with the money moves (default: none). */
  events?: BillingEvents;
  /** A pending payment younger than this is not queried at the provider on read (notifications come first). */
  pollGraceMs?: number;
  /** A failed or expired payment is asked about again at most this often while in the recheck window. */
  recheckEveryMs?: number;
}

export interface CreatePaymentInput {
  provider: string;
  amount: number;
  currency: string;
}

export function createPayments(ctx: AppContext, ledger: Ledger, providers: Map<PaymentProviderId, PaymentProvider>, opts: PaymentsOptions = {}, announce?: MoneyEvents) {
  const { db } = ctx.database;
  const { config, log } = ctx;
  const pollGraceMs = opts.pollGraceMs ?? 10_000;
  // cpd_payments_total{provider,status}: payments created (pending) and each move to paid, failed or
  // expired, counted once; refunds.service.ts adds refunded, disputed, refund_failed, dispute_won.
  const paymentsCounter = new HotCounter(
    'cpd_payments_total',
    'Payments created (status pending) and settled (paid, failed, expired); refunds and disputes applied (refunded, disputed) and given back (refund_failed, dispute_won); by provider',
    ['provider', 'status'],
  ).register(ctx.metrics);
  const counted = (provider: string, status: string) => paymentsCounter.inc([provider, status]);
  const recheckEveryMs = opts.recheckEveryMs ?? 5 * 60_000;
  const events = opts.events ?? NO_EVENTS;

  /** Checks in a fixed order, so the first problem is the one reported: provider known, currency, bounds, decimals, enabled. */
  function validate(input: CreatePaymentInput): { provider: PaymentProvider; amountMicros: bigint } {
    if (!KNOWN_PROVIDERS.includes(input.provider)) throw new AppError('invalid', `unknown provider "${input.provider}"`);
    if (input.currency !== config.currency) throw new AppError('invalid', `currency must be ${config.currency} on this site`);
    if (!Number.isFinite(input.amount) || input.amount < config.topupMin || input.amount > config.topupMax)
      throw new AppError('invalid', `amount must be between ${config.topupMin} and ${config.topupMax} ${config.currency}`);
    const amountMicros = centsAmountToMicros(input.amount);
    if (amountMicros === null) throw new AppError('invalid', 'amount must have at most two decimals');
    const provider = providers.get(input.provider as PaymentProviderId);
    if (!provider) throw new AppError('conflict', `provider "${input.provider}" is not enabled on this site`);
    return { provider, amountMicros };
  }

  async function create(userId: string, input: CreatePaymentInput, idempotencyKey?: string) {
    const { provider, amountMicros } = validate(input);
    const requestHash = sha256Hex(`${provider.id}|${amountMicros}|${input.currency}`);
    if (idempotencyKey !== undefined) {
      const existing = await byIdempotencyKey(userId, idempotencyKey);
      if (existing) return replayCreate(existing, requestHash);
    }
    const now = ctx.clock.now();
    const row = {
      id: newId('pay'),
      userId,
      provider: provider.id,
      amountMicros,
      currency: config.currency,
      status: 'pending',
      idempotencyKey: idempotencyKey ?? null,
      requestHash,
      createdAt: now,
      expiresAt: new Date(now.getTime() + PAYMENT_TTL_MS),
      updatedAt: now,
    };
    const inserted = await db.insert(payments).values(row).onConflictDoNothing().returning({ id: payments.id });
    if (inserted.length === 0) return replayCreate((await byIdempotencyKey(userId, idempotencyKey!))!, requestHash);
    counted(provider.id, 'pending');

    let order: Awaited<ReturnType<PaymentProvider['createOrder']>>;
    try {
      order = await provider.createOrder({
        paymentId: row.id,
        amountMicros,
        currency: config.currency,
        description: `Wallet top-up ${row.id}`,
        expiresAt: row.expiresAt,
      });
    } catch (err) {
      log.error({ err, payment_id: row.id, provider: provider.id }, 'provider refused to create the order');
      const failed = await db.update(payments).set({ status: 'failed', updatedAt: ctx.clock.now() }).where(and(eq(payments.id, row.id), eq(payments.status, 'pending'))).returning({ id: payments.id });
      if (failed.length) counted(provider.id, 'failed');
      throw new AppError('upstream', 'the payment provider is unavailable, try again');
    }
    const [saved] = await db
      .update(payments)
      .set({ redirectUrl: order.redirectUrl ?? null, qrCodeUrl: order.qrCodeUrl ?? null, providerOrderId: order.providerOrderId ?? null, expiresAt: order.expiresAt })
      .where(eq(payments.id, row.id))
      .returning();
    return createdView(saved!);
  }

  async function byIdempotencyKey(userId: string, key: string) {
    const [p] = await db.select().from(payments).where(and(eq(payments.userId, userId), eq(payments.idempotencyKey, key)));
    return p;
  }

  /** Same key: the same payment. A twin request still waiting for its provider order is awaited (up to 10 s). */
  async function replayCreate(existing: Payment, requestHash: string) {
    if (existing.requestHash !== requestHash) throw new AppError('conflict', 'this Idempotency-Key was used for a different payment request');
    let p = existing;
    for (let waited = 0; p.status === 'pending' && !p.redirectUrl && !p.qrCodeUrl && waited < 10_000; waited += 100) {
      await Bun.sleep(100);
      p = (await reload(p.id))!;
    }
    return createdView(p);
  }

  async function list(userId: string, query: { limit: number; cursor?: string; status?: string }) {
    const after = decodeCursor(query.cursor);
    // Expire what is due first, so a status filter never shows a pending payment that is over.
    await sweep({ userId });
    const rows = await db
      .select()
      .from(payments)
      .where(
        and(
          eq(payments.userId, userId),
          query.status ? eq(payments.status, query.status) : undefined,
          after ? or(lt(payments.createdAt, after.createdAt), and(eq(payments.createdAt, after.createdAt), lt(payments.id, after.id))) : undefined,
        ),
      )
      .orderBy(desc(payments.createdAt), desc(payments.id))
      .limit(query.limit + 1);
    const { items, nextCursor } = page(rows, query.limit);
    return { payments: items.map(listView), next_cursor: nextCursor };
  }

  /**
   * Every account's payments for operators, newest first, filtered by status, provider and user.
   * As stored: a pending payment past its expiry is expired by the sweeper within a minute (or by
   * a reconcile), not here, so a listing never waits on provider calls.
   */
  async function listAll(query: { limit: number; cursor?: string; status?: string; provider?: string; userId?: string }) {
    const after = decodeCursor(query.cursor);
    const rows = await db
      .select()
      .from(payments)
      .where(
        and(
          query.status ? eq(payments.status, query.status) : undefined,
          query.provider ? eq(payments.provider, query.provider) : undefined,
          query.userId ? eq(payments.userId, query.userId) : undefined,
          olderThan(payments, payments.createdAt, payments.id, after),
        ),
      )
      .orderBy(desc(payments.createdAt), desc(payments.id))
      .limit(query.limit + 1);
    const { items, nextCursor } = page(rows, query.limit);
    return { payments: await adminViews(items), next_cursor: nextCursor };
  }

  /** Operators' shape of payments, each with its refunds and disputes (one query for them all). */
  async function adminViews(rows: Payment[]) {
    const refunds = await refundViewsOf(db, rows.map((p) => p.id));
    return rows.map((p) => adminView(p, refunds.get(p.id) ?? []));
  }

  /** Owner first: another account's payment is the same 404 as a missing one. */
  async function requireOwn(userId: string, id: string): Promise<Payment> {
    const [p] = await db.select().from(payments).where(and(eq(payments.id, id), eq(payments.userId, userId)));
    if (!p) throw new AppError('not_found', 'payment not found');
    return p;
  }

  /** A read that reconciles: asks the provider about a pending payment past the grace period, and expires it when due. */
  async function get(userId: string, id: string) {
    let p = await requireOwn(userId, id);
    if (p.status === 'pending') p = await reconcile(p);
    return detailView(p);
  }

  async function reconcile(p: Payment, opts: { force?: boolean } = {}): Promise<Payment> {
    const now = ctx.clock.now();
    const due = p.expiresAt <= now;
    const lastAsked = Math.max(p.createdAt.getTime(), p.checkedAt?.getTime() ?? 0);
    if (opts.force || due || now.getTime() - lastAsked >= pollGraceMs) {
      await db.update(payments).set({ checkedAt: now }).where(eq(payments.id, p.id));
      const report = await queryProvider(p);
      if (report && report.status !== 'pending') {
        const settled = await settle(p.provider as PaymentProviderId, { ...report, paymentId: p.id }, 'query');
        if (settled.status !== 'pending') return settled; // else a mismatch was recorded: expire as usual
      }
    }
    if (!due) return (await reload(p.id))!;
    await closeQuietly(p);
    return settle(p.provider as PaymentProviderId, { paymentId: p.id, status: 'expired' }, 'expiry');
  }

  /**
   * Asks the provider about one payment, whatever its state, and settles what it says (a paid
   * report credits once, even for a failed or expired payment). A pending payment past expiry is
   * expired as usual. Answers the payment as it now is; a paid one is not asked about again.
   */
  async function reconcilePayment(id: string): Promise<Payment> {
    const p = await reload(id);
    if (!p) throw new AppError('not_found', 'payment not found');
    if (p.status === 'paid') return p;
    if (p.status === 'pending') return reconcile(p, { force: true });
    return recheck(p);
  }

  /** A failed or expired payment: paid is the only report that changes it (money received is credited). */
  async function recheck(p: Payment): Promise<Payment> {
    await db.update(payments).set({ checkedAt: ctx.clock.now() }).where(eq(payments.id, p.id));
    const report = await queryProvider(p);
    if (report?.status !== 'paid') return (await reload(p.id))!;
    return settle(p.provider as PaymentProviderId, { ...report, paymentId: p.id }, 'recheck');
  }

  async function queryProvider(p: Payment): Promise<ProviderReport | null> {
    const provider = providers.get(p.provider as PaymentProviderId);
    if (!provider) return null;
    try {
      return await provider.queryOrder({ id: p.id, providerOrderId: p.providerOrderId });
    } catch (err) {
      log.warn({ err, payment_id: p.id }, 'provider order query failed');
      return null;
    }
  }

  async function closeQuietly(p: Payment) {
    try {
      await providers.get(p.provider as PaymentProviderId)?.closeOrder({ id: p.id, providerOrderId: p.providerOrderId });
    } catch (err) {
      // The payment still expires here; a paid notification that arrives later is still credited.
      log.warn({ err, payment_id: p.id }, 'provider order close failed');
    }
  }

  const reload = async (id: string) => (await db.select().from(payments).where(eq(payments.id, id)))[0];

  /**
   * Applies a provider's report under the payment's row lock. paid: credit once (a replay finds
   * status paid and does nothing); a wrong amount or currency is recorded and not credited.
   */
  async function settle(providerId: PaymentProviderId, report: ProviderReport, source: string): Promise<Payment> {
    let moved: string | null = null;
    const settled = await db.transaction(async (tx) => {
      const [p] = await tx
        .select()
        .from(payments)
        .where(and(eq(payments.id, report.paymentId), eq(payments.provider, providerId)))
        .for('update');
      if (!p) throw new AppError('not_found', 'payment not found');
      const now = ctx.clock.now();
      if (report.status === 'paid') {
        if (p.status === 'paid') return p;
        if (report.amountMicros !== p.amountMicros || report.currency !== p.currency) {
          log.error(
            { payment_id: p.id, source, expected: String(p.amountMicros), reported: String(report.amountMicros), currency: report.currency },
            'provider reported a paid amount that does not match the order; not credited',
          );
          const [m] = await tx
            .update(payments)
            .set({ mismatchAmountMicros: report.amountMicros ?? null, mismatchCurrency: report.currency ?? null, updatedAt: now })
            .where(eq(payments.id, p.id))
            .returning();
          return m!;
        }
        const [paid] = await tx
          .update(payments)
          .set({ status: 'paid', paidAt: now, providerReference: report.providerReference ?? null, updatedAt: now })
          .where(eq(payments.id, p.id))
          .returning();
        await ledger.apply(tx, {
          userId: p.userId,
          type: 'topup',
          amountMicros: p.amountMicros,
          reference: `payment:${p.id}`,
          description: `Top-up ${p.id} (${p.provider})`,
        });
        await events.record(tx, {
          userId: p.userId,
          type: 'payment.paid',
          data: { payment_id: p.id, provider: p.provider, amount: toMajor(p.amountMicros), currency: p.currency, paid_at: now.toISOString() },
        });
        log.info({ payment_id: p.id, source, was: p.status }, 'payment paid and credited');
        moved = 'paid';
        return paid!;
      }
      if (p.status !== 'pending' || report.status === 'pending') return p;
      const [next] = await tx.update(payments).set({ status: report.status, updatedAt: now }).where(eq(payments.id, p.id)).returning();
      log.info({ payment_id: p.id, source, status: report.status }, 'payment settled');
      moved = report.status;
      return next!;
    });
    // Counted (and told) after the commit, so a rolled-back settlement is not.
    if (moved) counted(providerId, moved);
    if (moved === 'paid')
      announce?.emit({ kind: 'payment_paid', userId: settled.userId, paymentId: settled.id, amountMicros: settled.amountMicros, currency: settled.currency });
    return settled;
  }

  /** Expires pending payments past expires_at (asking the provider first: a paid one is credited instead). */
  async function sweep(scope: { userId?: string; limit?: number } = {}): Promise<number> {
    const due = await db
      .select()
      .from(payments)
      .where(and(eq(payments.status, 'pending'), lte(payments.expiresAt, ctx.clock.now()), scope.userId ? eq(payments.userId, scope.userId) : undefined))
      .limit(scope.limit ?? 100);
    for (const p of due) await reconcile(p);
    return due.length;
  }

  /**
   * Asks again about failed and expired payments created within PAYMENT_RECHECK_WINDOW, each at
   * most every recheckEveryMs (least recently asked first): a payment completed after its order
   * closed, whose notification never got through, is still credited once. The sweeper runs it.
   */
  async function recheckClosed(limit = 100): Promise<number> {
    const now = ctx.clock.now().getTime();
    const rows = await db
      .select()
      .from(payments)
      .where(
        and(
          inArray(payments.status, ['failed', 'expired']),
          gt(payments.createdAt, new Date(now - config.paymentRecheckWindowMs)),
          isNull(payments.mismatchAmountMicros), // a wrong amount is recorded once and left to the operator
          or(isNull(payments.checkedAt), lte(payments.checkedAt, new Date(now - recheckEveryMs))),
        ),
      )
      .orderBy(sql`${payments.checkedAt} asc nulls first`, asc(payments.createdAt))
      .limit(limit);
    for (const p of rows) await recheck(p);
    return rows.length;
  }

  function providerList() {
    return {
      providers: [...providers.values()].map((p) => ({ id: p.id, name: p.name, currency: config.currency, mode: config.paymentMode })),
    };
  }

  /** One payment in the operators' shape, any account's; 404 when there is none. */
  async function requireAny(id: string) {
    const p = await reload(id);
    if (!p) throw new AppError('not_found', 'payment not found');
    return (await adminViews([p]))[0]!;
  }

  /** Whose wallet a payment credits (null: no such payment), so its page can be shown to an organization's owners and admins. */
  const payerOf = async (id: string): Promise<string | null> => (await db.select({ userId: payments.userId }).from(payments).where(eq(payments.id, id)))[0]?.userId ?? null;

  return { create, list, listAll, requireAny, get, requireOwn, payerOf, settle, sweep, recheckClosed, reconcilePayment, providerList, providers, count: counted };
}

export type Payments = ReturnType<typeof createPayments>;

function baseView(p: Payment) {
  return {
    id: p.id,
    provider: p.provider,
    amount: toMajor(p.amountMicros),
    currency: p.currency,
    status: p.status,
    created_at: p.createdAt.toISOString(),
    /** What refunds and disputes hold back of it; a refunded payment stays paid. */
    refunded_amount: toMajor(p.refundedAmountMicros),
  };
}

function createdView(p: Payment) {
  return {
    ...baseView(p),
    ...(p.redirectUrl ? { redirect_url: p.redirectUrl } : {}),
    ...(p.qrCodeUrl ? { qr_code_url: p.qrCodeUrl } : {}),
    expires_at: p.expiresAt.toISOString(),
  };
}

function listView(p: Payment) {
  return { ...baseView(p), paid_at: p.paidAt?.toISOString() ?? null };
}

/** What went wrong with a payment, in words, for operators; null when nothing did. */
function failureOf(p: Payment): string | null {
  if (p.mismatchAmountMicros !== null)
    return `the provider reported ${toMajor(p.mismatchAmountMicros)} ${p.mismatchCurrency ?? ''} paid for an order of ${toMajor(p.amountMicros)} ${p.currency}; not credited`.replace('  ', ' ');
  if (p.status === 'failed') return 'the provider reported the payment failed';
  if (p.status === 'expired') return 'not paid before it expired';
  return null;
}

/** The user's list shape plus who paid, what the provider said, and the payment's refunds and disputes. */
function adminView(p: Payment, refunds: RefundView[]) {
  return { ...listView(p), user_id: p.userId, provider_ref: p.providerReference, failure: failureOf(p), refunds };
}

function detailView(p: Payment) {
  return { ...listView(p), expires_at: p.expiresAt.toISOString(), provider_reference: p.providerReference };
}

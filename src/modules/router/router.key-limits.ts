/**
 * API key limits at admission, for every gateway entry point: allowed models (403), requests per
 * minute (429 with Retry-After) and the spend limit per period (402).
 *
 * The spend limit has the wallet's bound: a request is admitted when the key's spent amount
 * (its committed usage rows in the period) plus the holds of its requests in flight plus this
 * request's upper-bound cost stays within the limit; otherwise only when the key has nothing in
 * flight and is still below its limit, so at most one request at a time crosses the limit, by at
 * most its own cost. The holds live in the database, so the bound is the same across replicas:
 * one transaction per admission takes a per-key advisory lock and then reads (a fresh snapshot,
 * after the lock) the usage and the holds. A hold is deleted once its usage row is committed; a
 * dead process's holds lapse after HOLD_TTL_MS. Keys without a spend limit never touch the
 * database here. docs/gateway.md has the measured cost.
 */
import { and, eq, gt, gte, inArray, sql } from 'drizzle-orm';
import type { AppContext } from '../../platform/context';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { TokenBucketLimiter } from '../../platform/http/rate-limit';
import { routerKeyHolds, routerUsage } from './router.tables';

export type SpendPeriod = 'day' | 'month' | 'total';

export interface KeyLimits {
  models: readonly string[] | null;
  spendLimitMicros: bigint | null;
  spendPeriod: SpendPeriod | null;
  rpm: number | null;
}

/** The accounts module's lookup (its key cache); null for an unknown key. */
export type KeyLimitsSource = (keyId: string) => Promise<KeyLimits | null>;

/** Longer than any request may reasonably run; a hold older than this no longer counts. */
const HOLD_TTL_MS = 15 * 60_000;
/** A number only this module uses as the first half of its advisory lock keys. */
const LOCK_SPACE = 0x6b6579;

export interface KeyHold {
  /** After the request's usage row committed (or could not be written): the row counts instead. */
  release(): void;
}

/** Start of the key's current period (UTC day or month; the epoch for `total`). */
export function periodStart(period: SpendPeriod, now: Date): Date {
  if (period === 'day') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  if (period === 'month') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return new Date(0);
}

export function createKeyLimits(ctx: AppContext, limitsOf: KeyLimitsSource) {
  const { db } = ctx.database;
  /** One limiter per distinct rpm value (the limiter takes one rate); buckets are per key. */
  const perMinute = new Map<number, TokenBucketLimiter>();

  const spentSince = (userId: string, keyId: string, since: Date) =>
    sql`(select coalesce(sum(${routerUsage.costMicros}), 0) from ${routerUsage} where ${and(eq(routerUsage.userId, userId), eq(routerUsage.keyId, keyId), gte(routerUsage.createdAt, since))})`;

  /** Spent by each key in its period, from the usage rows (one query for all of a user's keys). */
  async function spentBy(userId: string, keys: Array<{ keyId: string; period: SpendPeriod }>): Promise<Map<string, bigint>> {
    const out = new Map<string, bigint>();
    if (!keys.length) return out;
    const now = ctx.clock.now();
    const since = (p: SpendPeriod) => sql`coalesce(sum(${routerUsage.costMicros}) filter (where ${gte(routerUsage.createdAt, periodStart(p, now))}), 0)::text`;
    const rows = await db
      .select({ keyId: routerUsage.keyId, day: since('day'), month: since('month'), total: since('total') })
      .from(routerUsage)
      .where(and(eq(routerUsage.userId, userId), inArray(routerUsage.keyId, keys.map((k) => k.keyId))))
      .groupBy(routerUsage.keyId);
    const byKey = new Map(rows.map((r) => [r.keyId, r as Record<SpendPeriod, string>]));
    for (const k of keys) out.set(k.keyId, BigInt(byKey.get(k.keyId)?.[k.period] ?? '0'));
    return out;
  }

  function enforceRpm(keyId: string, rpm: number) {
    let limiter = perMinute.get(rpm);
    if (!limiter) {
      limiter = new TokenBucketLimiter({ capacity: rpm, refillPerSec: rpm / 60 });
      perMinute.set(rpm, limiter);
    }
    limiter.enforce(keyId, 1, `this API key allows ${rpm} requests per minute`);
  }

  async function holdSpend(userId: string, keyId: string, limit: bigint, period: SpendPeriod, estimateMicros: bigint): Promise<KeyHold> {
    const now = ctx.clock.now();
    const id = newId('hold');
    const admitted = await db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(${LOCK_SPACE}, hashtext(${keyId}))`);
      const live = and(eq(routerKeyHolds.keyId, keyId), gt(routerKeyHolds.expiresAt, now));
      const [state] = await tx
        .select({
          spent: sql<string>`${spentSince(userId, keyId, periodStart(period, now))}::text`,
          held: sql<string>`(select coalesce(sum(${routerKeyHolds.micros}), 0) from ${routerKeyHolds} where ${live})::text`,
          holds: sql<number>`(select count(*) from ${routerKeyHolds} where ${live})::int`,
        })
        .from(sql`(select 1) as one`);
      const spent = BigInt(state!.spent);
      const held = BigInt(state!.held);
      const covered = spent + held + estimateMicros <= limit;
      if (!covered && !(Number(state!.holds) === 0 && spent < limit)) return false;
      await tx.insert(routerKeyHolds).values({ id, keyId, micros: estimateMicros, expiresAt: new Date(now.getTime() + HOLD_TTL_MS) });
      return true;
    });
    if (!admitted) throw new AppError('payment_required', 'key spend limit reached');
    let released = false;
    return {
      release() {
        if (released) return;
        released = true;
        db.delete(routerKeyHolds)
          .where(eq(routerKeyHolds.id, id))
          .catch((err) => ctx.log.warn({ err, key_id: keyId }, 'could not release a key spend hold; it lapses'));
      },
    };
  }

  /**
   * Checks the key's limits for a request naming `entrypoint` with this upper-bound cost; answers
   * the spend hold to release after the usage row committed (null when the key has no spend limit).
   */
  async function admit(caller: { userId: string; keyId: string | null }, entrypoint: string, estimateMicros: bigint): Promise<KeyHold | null> {
    if (!caller.keyId) return null;
    const limits = await limitsOf(caller.keyId);
    if (!limits) return null;
    if (limits.models && !limits.models.includes(entrypoint)) throw new AppError('forbidden', `this API key may not use "${entrypoint}"`);
    if (limits.rpm !== null) enforceRpm(caller.keyId, limits.rpm);
    if (limits.spendLimitMicros === null) return null;
    return holdSpend(caller.userId, caller.keyId, limits.spendLimitMicros, limits.spendPeriod ?? 'total', estimateMicros);
  }

  return { admit, spentBy };
}

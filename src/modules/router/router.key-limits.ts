/**
 * API key limits at admission, for every gateway entry point: allowed models (403), requests per
 * minute (429 with Retry-After) and the spend limit per period (402).
 *
 * The spend limit has the wallet's bound: a request is admitted when the key's spent amount
 * (its committed usage in the period, from the per-key daily rollup written with the usage rows) plus the holds of its requests in flight plus this
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
import { DEFAULT_MAX_KEYS, TokenBucketLimiter } from '../../platform/http/rate-limit';
import { routerKeyHolds, routerUsageKeyDaily } from './router.tables';

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
  /** After the request's usage row committed (or was set aside): the row counts instead. */
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
  /** One limiter per distinct rpm value (the limiter takes one rate); buckets are per key, shared with the other live replicas. */
  const perMinute = new Map<number, TokenBucketLimiter>();
  const toRelease: string[] = [];
  const releasing = new Set<Promise<unknown>>();

  const spentSince = (keyId: string, since: Date) =>
    sql`(select coalesce(sum(${routerUsageKeyDaily.costMicros}), 0) from ${routerUsageKeyDaily} where ${and(eq(routerUsageKeyDaily.keyId, keyId), gte(routerUsageKeyDaily.day, since))})`;

  /** Spent by each key in its period, from the usage rows' per-key daily rollup (one query for all of a user's keys). */
  async function spentBy(keys: Array<{ keyId: string; period: SpendPeriod }>): Promise<Map<string, bigint>> {
    const out = new Map<string, bigint>();
    if (!keys.length) return out;
    const now = ctx.clock.now();
    const since = (p: SpendPeriod) => sql<string>`coalesce(sum(${routerUsageKeyDaily.costMicros}) filter (where ${gte(routerUsageKeyDaily.day, periodStart(p, now))}), 0)::text`;
    const rows = await db
      .select({ keyId: routerUsageKeyDaily.keyId, day: since('day'), month: since('month'), total: since('total') })
      .from(routerUsageKeyDaily)
      .where(inArray(routerUsageKeyDaily.keyId, keys.map((k) => k.keyId)))
      .groupBy(routerUsageKeyDaily.keyId);
    const byKey = new Map(rows.map((r) => [r.keyId, r as Record<SpendPeriod, string>]));
    for (const k of keys) out.set(k.keyId, BigInt(byKey.get(k.keyId)?.[k.period] ?? '0'));
    return out;
  }

  function enforceRpm(keyId: string, rpm: number) {
    let limiter = perMinute.get(rpm);
    if (!limiter) {
      limiter = new TokenBucketLimiter({ capacity: rpm, refillPerSec: rpm / 60 }, () => ctx.clock.now().getTime(), DEFAULT_MAX_KEYS, ctx.replicas);
      perMinute.set(rpm, limiter);
    }
    limiter.enforce(keyId, 1, `this API key allows ${rpm} requests per minute`);
  }

  async function holdSpend(keyId: string, limit: bigint, period: SpendPeriod, estimateMicros: bigint): Promise<KeyHold> {
    const now = ctx.clock.now();
    const id = newId('hold');
    const admitted = await db.transaction(async (tx) => {
      // A hold lost with a database crash only forgets requests in flight then; it need not wait for the disk.
      await tx.execute(sql`select set_config('synchronous_commit', 'off', true), pg_advisory_xact_lock(${LOCK_SPACE}, hashtext(${keyId}))`);
      // After the lock, this statement's snapshot sees every committed usage row and hold of the key.
      const live = and(eq(routerKeyHolds.keyId, keyId), gt(routerKeyHolds.expiresAt, now));
      const spent = spentSince(keyId, periodStart(period, now));
      const held = sql`(select coalesce(sum(${routerKeyHolds.micros}), 0) from ${routerKeyHolds} where ${live})`;
      const inFlight = sql`exists (select 1 from ${routerKeyHolds} where ${live})`;
      const rows = await ctx.database.query(
        sql`
        insert into ${routerKeyHolds} (id, key_id, micros, expires_at)
        select ${id}, ${keyId}, ${estimateMicros}, ${new Date(now.getTime() + HOLD_TTL_MS).toISOString()}::timestamptz
        where ${spent} + ${held} + ${estimateMicros} <= ${limit} or (not ${inFlight} and ${spent} < ${limit})
        returning id`,
        tx,
      );
      return rows.length > 0;
    });
    if (!admitted) throw new AppError('payment_required', 'key spend limit reached');
    let released = false;
    return {
      release() {
        if (released) return;
        released = true;
        toRelease.push(id);
        if (toRelease.length === 1) setImmediate(releaseQueued);
      },
    };
  }

  /** Deletes the holds released since the last turn in one transaction (one disk write, not one per request). */
  function releaseQueued() {
    const ids = toRelease.splice(0);
    if (!ids.length) return;
    const done = db
      .transaction(async (tx) => {
        await tx.execute(sql`select set_config('synchronous_commit', 'off', true)`);
        await tx.delete(routerKeyHolds).where(inArray(routerKeyHolds.id, ids));
      })
      .catch((err) => ctx.log.warn({ err, holds: ids.length }, 'could not release key spend holds; they lapse'))
      .finally(() => releasing.delete(done));
    releasing.add(done);
  }

  /**
   * Checks the key's limits for a request naming `entrypoint` with this upper-bound cost; answers
   * the spend hold to release after the usage row committed (null when the key has no spend limit).
   */
  async function admit(
    caller: { userId: string; keyId: string | null },
    entrypoint: string,
    estimateMicros: bigint,
  ): Promise<KeyHold | null> {
    if (!caller.keyId) return null;
    const limits = await limitsOf(caller.keyId);
    if (!limits) return null;
    if (limits.models && !limits.models.includes(entrypoint)) throw new AppError('forbidden', `this API key may not use "${entrypoint}"`);
    if (limits.rpm !== null) enforceRpm(caller.keyId, limits.rpm);
    if (limits.spendLimitMicros === null) return null;
    return holdSpend(caller.keyId, limits.spendLimitMicros, limits.spendPeriod ?? 'total', estimateMicros);
  }

  return {
    admit,
    spentBy,
    /** Waits for releases under way (graceful stop, after the usage writer drained). */
    async close() {
      await new Promise((resolve) => setImmediate(resolve));
      releaseQueued();
      await Promise.allSettled(releasing);
    },
  };
}

/**
 * API key limits at admission, for every gateway entry point: allowed models (403), requests per
 * minute (429 with Retry-After) and the spend limit per period (402).
 *
 * The spend limit has the wallet's bound, across every process on the database, without a
 * database round trip per request: the wallet's admission (metering.admission.ts) runs over the
 * key's remaining budget in its period instead of a balance. Each process holds a grant of that
 * budget (metering.key-grants.ts: committed spend plus the live grants never exceed the limit) and
 * admits from memory while the grant covers its requests in flight plus this one's upper-bound
 * cost; otherwise it asks for more, and at the end for the key's one margin, so at most one
 * request at a time takes the key past its limit, by at most its own cost. The usage commit lowers
 * the grant by the cost in the transaction that adds it to the key's daily spend. A changed limit
 * or a new period (UTC day or month) makes the process drop its local grant and ask again; a
 * PATCH reaches every process through the accounts key cache's notification. Keys without a spend
 * limit never touch the database here. docs/benchmarks.md has the measured cost.
 */
import { gte, inArray, sql } from 'drizzle-orm';
import type { Grant } from '../billing';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { toMajor } from '../../platform/money';
import { DEFAULT_MAX_KEYS, TokenBucketLimiter } from '../../platform/http/rate-limit';
import { type GrantSource, type Need, type Ticket, createAdmission } from './metering.admission';
import { type KeyBudget, createKeyGrants } from './metering.key-grants';
import type { KeyLimits, SpendPeriod } from './metering.key-limits.types';
import { routerUsageKeyDaily } from './metering.tables';

/** The accounts module's lookup (its key cache); null for an unknown key. */
export type KeyLimitsSource = (keyId: string) => Promise<KeyLimits | null>;

/** A key's limits once its `models` allowed the request's name (createKeyLimits' `allowed`). */
export type AllowedKey = KeyLimits & { keyId: string; userId?: string };

/**
 * Where key.spend_limit_reached is recorded (the webhooks module's event sink, given by the
 * composition root); `dedupeKey` records it once per key and period, across replicas.
 */
export interface KeyEvents {
  record(on: DbOrTx, event: { userId: string; type: 'key.spend_limit_reached'; data: Record<string, unknown>; dedupeKey: string }): Promise<unknown>;
}

export interface KeyLimitsOptions {
  /** This process's name in the grants table (the wallet grants' holder). */
  holder: string;
  grantTtlMs: number;
  /** How long a request at the margin waits for this key's other requests in this process to settle. */
  waitMs: number;
  events?: KeyEvents;
}

const KEY_REFUSALS = {
  exhausted: 'key spend limit reached',
  reserved: 'key spend limit reached: the rest is reserved by requests in flight',
  unavailable: 'the key spend limit cannot be checked right now',
};

/** A member's cap of an organization's spend (the budget's refusals, in the member's words). */
const MEMBER_REFUSALS = {
  exhausted: 'your spend limit in this organization is reached',
  reserved: 'your spend limit in this organization is reached: the rest is reserved by requests in flight',
  unavailable: 'your spend limit in this organization cannot be checked right now',
};

/** Start of the key's current period (UTC day or month; the epoch for `total`). */
export function periodStart(period: SpendPeriod, now: Date): Date {
  if (period === 'day') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  if (period === 'month') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return new Date(0);
}

export function createKeyLimits(ctx: AppContext, limitsOf: KeyLimitsSource, opts: KeyLimitsOptions) {
  const { db } = ctx.database;
  /** One limiter per distinct rpm value (the limiter takes one rate); buckets are per key, shared with the other live replicas. */
  const perMinute = new Map<number, TokenBucketLimiter>();
  const grants = createKeyGrants(ctx);
  /** The limit and period each key's local grant is a share of (set at admission, before any question). */
  const budgets = new Map<string, KeyBudget>();
  const source: GrantSource = {
    request: (req) => grants.request(req.userId, budgets.get(req.userId)!, req),
    endMargin: grants.endMargin,
    giveBack: grants.giveBack,
    renewAll: grants.renewAll,
    releaseAll: grants.releaseAll,
  };
  // No notifications: a request not covered asks the database, which sees every commit at once.
  const admission = createAdmission(source, async () => {}, ctx.log, { ...opts, refusals: KEY_REFUSALS });
  // Members' caps share the grants (keyed by the budget's id) and differ only in their refusals.
  const memberAdmission = createAdmission(source, async () => {}, ctx.log, { ...opts, refusals: MEMBER_REFUSALS });

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

  /** Drops the key's local grant when its limit, period or period start changed since its last request. */
  function budgetOf(keyId: string, limitMicros: bigint, period: SpendPeriod, of = admission): void {
    const start = periodStart(period, ctx.clock.now());
    const known = budgets.get(keyId);
    if (known && known.limitMicros === limitMicros && known.period === period && known.periodStart.getTime() === start.getTime()) return;
    if (known) of.forget(keyId);
    budgets.set(keyId, { limitMicros, period, periodStart: start });
  }

  /**
   * The usage commit's part: issues (on the commit's transaction, without awaiting) the statement
   * lowering this process's key grants by what the batch spent; null when no row is of a key with
   * a grant here.
   */
  function consume(on: DbOrTx, rows: ReadonlyArray<{ keyId: string | null; memberKey?: string | null; costMicros: bigint }>): Promise<Map<string, Grant>> | null {
    const spent = new Map<string, bigint>();
    const add = (id: string | null | undefined, cost: bigint) => {
      if (id && cost > 0n && budgets.has(id)) spent.set(id, (spent.get(id) ?? 0n) + cost);
    };
    for (const r of rows) {
      add(r.keyId, r.costMicros);
      add(r.memberKey, r.costMicros);
    }
    if (!spent.size) return null;
    return grants.consume(on, opts.holder, spent).then((touched) => new Map(touched.map((r) => [r.key_id, grants.grantOf(r)])));
  }

  /**
   * The key's limits, once its `models` allow `entrypoint` (403 otherwise), before anything looks
   * at the model: a key limited to some models learns nothing of the others, whether they exist or
   * have a backend. Null for a session caller or a key without limits.
   */
  async function allowed(keyId: string | null, entrypoint: string, userId?: string): Promise<AllowedKey | null> {
    if (!keyId) return null;
    const limits = await limitsOf(keyId);
    if (!limits) return null;
    if (limits.models && !limits.models.includes(entrypoint)) throw new AppError('forbidden', `this API key may not use "${entrypoint}"`);
    return { ...limits, keyId, userId };
  }

  /** The period and limit each key was last announced as spent for (this process asks the database once per key, period and limit). */
  const announced = new Map<string, string>();
  /**
   * key.spend_limit_reached, when the database found the key's committed spend at its limit: once
   * per key and period (the event's dedupe key), off the request's path.
   */
  function reached(limits: AllowedKey) {
    const budget = budgets.get(limits.keyId);
    if (!opts.events || !limits.userId || !budget) return;
    const periodStart = budget.periodStart.toISOString();
    const once = `${periodStart}:${budget.limitMicros}`;
    if (announced.get(limits.keyId) === once) return;
    announced.set(limits.keyId, once);
    opts.events
      .record(db, {
        userId: limits.userId,
        type: 'key.spend_limit_reached',
        // A limit raised and reached again in the same period is announced again.
        dedupeKey: `key.spend_limit_reached:${limits.keyId}:${once}`,
        data: { key_id: limits.keyId, spend_limit: toMajor(budget.limitMicros), spend_period: budget.period, period_start: periodStart },
      })
      .catch((err) => {
        announced.delete(limits.keyId);
        ctx.log.warn({ err, key_id: limits.keyId }, 'key.spend_limit_reached could not be recorded');
      });
  }

  /**
   * The rest of the key's limits for a request with this upper bound (and minimum) of its cost;
   * answers the spend hold to release after the usage row committed (null when the key has no
   * spend limit). The hold may be less than the bound, as the wallet's may (metering.admission.ts).
   */
  async function admit(limits: AllowedKey | null, need: Need, signal?: AbortSignal): Promise<Ticket | null> {
    if (!limits) return null;
    if (limits.rpm !== null) enforceRpm(limits.keyId, limits.rpm);
    let keyHold: Ticket | null = null;
    if (limits.spendLimitMicros !== null) {
      budgetOf(limits.keyId, limits.spendLimitMicros, limits.spendPeriod ?? 'total');
      try {
        keyHold = await admission.admit(limits.keyId, need, signal);
      } catch (err) {
        if (err instanceof AppError && err.message === KEY_REFUSALS.exhausted) reached(limits);
        throw err;
      }
    }
    const member = limits.member;
    if (!member || member.limitMicros === null) return keyHold;
    budgetOf(member.id, member.limitMicros, member.period ?? 'total', memberAdmission);
    let memberHold: Ticket;
    try {
      // What the key holds bounds what the member's budget needs.
      memberHold = await memberAdmission.admit(member.id, keyHold ? { ...need, estimate: keyHold.holdMicros } : need, signal);
    } catch (err) {
      keyHold?.release();
      throw err;
    }
    if (!keyHold) return memberHold;
    const both = keyHold;
    return {
      holdMicros: memberHold.holdMicros,
      release() {
        memberHold.release();
        both.release();
      },
    };
  }

  return {
    allowed,
    admit,
    spentBy,
    consume,
    /** The usage commit that lowered these key grants of ours is committed. */
    committed(changed: Map<string, Grant>) {
      admission.committed(changed);
      memberAdmission.committed(changed);
    },
    /** Gives every key grant back (graceful stop, after the usage writer drained). */
    async close() {
      await Promise.all([admission.close(), memberAdmission.close()]);
    },
  };
}

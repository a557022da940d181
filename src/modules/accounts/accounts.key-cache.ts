/**
 * The verified API keys cache, so the gateway does no database read per request. A revoke sends
 * NOTIFY on REVOKE_CHANNEL (payload: the key id, or `user:<id>` when an account is disabled)
 * inside the revoking transaction; every process sharing the database LISTENs and drops the key,
 * or all of the account's keys, at once. The cache only fills while this process is listening,
 * and entries also expire after CACHE_TTL_MS in case a notification is ever lost (a dropped LISTEN
 * connection). last_used_at is written at most once a minute per key.
 *
 * A key's limits (metering.key-limits.types.ts) are cached with it; a PATCH sends the same NOTIFY
 * as a revoke, so every process reloads the key with its new limits on its next use. An expired
 * key is refused like a revoked one.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { and, eq, isNull, or, lt } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';
import { sha256Hex } from '../../platform/crypto';
import { API_KEY_PREFIX, type Caller } from '../../platform/http/auth';
import { type KeyLimits, type SpendPeriod, NO_LIMITS, memberBudgetId } from '../metering';
import type { OrgMembership } from './accounts.org-port';
import { apiKeys, users } from './accounts.tables';

export const REVOKE_CHANNEL = 'cpd_api_key_revoked';
const USER_PAYLOAD = 'user:';
/** `org:<id>`: every key of an organization; `member:<org id>:<user id>`: one member's keys of it. */
const ORG_PAYLOAD = 'org:';
const MEMBER_PAYLOAD = 'member:';
const CACHE_TTL_MS = 60_000;
const CACHE_MAX = 10_000;
const LAST_USED_EVERY_MS = 60_000;
/** How long a revoke waits to hear its own NOTIFY back (by then every listener has been sent it). */
const ECHO_WAIT_MS = 2_000;
/**
 * Then a little longer before answering: PostgreSQL has queued the notification for every
 * listener, but another replica's backend and event loop may not have run yet on a busy host.
 * Revokes are rare; a client that saw 204 then finds the key refused everywhere.
 */
const REVOKE_GRACE_MS = 100;

/** A key's limits, and whether its requests are captured (cached with them for the gateway). */
export type KeySettings = KeyLimits & { capture: boolean };

export const limitsOfRow = (r: typeof apiKeys.$inferSelect): KeySettings => ({
  models: r.models,
  spendLimitMicros: r.spendLimitMicros,
  spendPeriod: r.spendPeriod as SpendPeriod | null,
  expiresAt: r.expiresAt,
  rpm: r.rpm,
  capture: r.capture,
});

/** A cached key: who it makes the caller, its settings, and who made it for which organization (null: personal). */
interface Entry {
  caller: Caller;
  limits: KeySettings;
  at: number;
  creator: string;
  orgId: string | null;
}

/** Whether a revoke payload (a key id, `user:…`, `org:…`, `member:…`) covers a cached key. */
function covers(payload: string, e: Entry): boolean {
  if (payload.startsWith(USER_PAYLOAD)) return e.creator === payload.slice(USER_PAYLOAD.length);
  if (payload.startsWith(ORG_PAYLOAD)) return e.orgId === payload.slice(ORG_PAYLOAD.length);
  if (payload.startsWith(MEMBER_PAYLOAD)) return e.orgId !== null && payload === memberBudgetId(e.orgId, e.creator);
  return e.caller.keyId === payload;
}

export function createKeyCache(ctx: AppContext, orgs: () => OrgMembership) {
  const { db } = ctx.database;
  const cache = new Map<string, Entry>();
  /** The limits of the cached keys, by key id, for the router's admission. */
  const limitsByKey = new Map<string, KeySettings>();
  const lastUsedWritten = new Map<string, number>();
  const echoWaiters = new Map<string, Array<() => void>>();
  const pendingWrites = new Set<Promise<unknown>>();
  let listening: Promise<void> | null = null;
  /** Bumped by every revoke heard; a lookup that raced one does not cache its (stale) answer. */
  let revokesHeard = 0;

  /** payload: a key id, `user:<id>` for every key of a disabled account, or an organization's (or one member's) keys. */
  function forget(payload: string) {
    revokesHeard++;
    for (const [hash, entry] of cache) {
      if (covers(payload, entry)) {
        cache.delete(hash);
        limitsByKey.delete(entry.caller.keyId!);
      }
    }
    limitsByKey.delete(payload);
    lastUsedWritten.delete(payload);
    for (const wake of echoWaiters.get(payload) ?? []) wake();
    echoWaiters.delete(payload);
  }

  function dropAll() {
    cache.clear();
    limitsByKey.clear();
  }

  /** LISTENs once per process (lazily: the CLI never needs it); unlistens at shutdown. */
  function ensureListening(): Promise<void> {
    // On every (re)connect the cache is dropped: a revoke announced while disconnected was missed.
    listening ??= ctx.database.listen(REVOKE_CHANNEL, forget, dropAll).then((unlisten) => {
      ctx.onShutdown(async () => {
        dropAll();
        await Promise.allSettled(pendingWrites);
        await unlisten();
      });
    });
    return listening;
  }

  /** The limits of a key (from the cache the key's lookup filled), or null for an unknown key. */
  async function limitsOf(keyId: string): Promise<KeySettings | null> {
    const cached = limitsByKey.get(keyId);
    if (cached) return cached;
    const [row] = await db.select().from(apiKeys).where(eq(apiKeys.id, keyId)).limit(1);
    return row ? settingsOf(row) : null;
  }

  /**
   * A key's settings; an organization's key also carries its creator's cap of the organization's
   * spend. Null: an organization's key whose creator is no longer a member (refused).
   */
  async function settingsOf(row: typeof apiKeys.$inferSelect): Promise<KeySettings | null> {
    const own = limitsOfRow(row);
    if (!row.orgId) return own;
    const member = await orgs().memberOf(row.orgId, row.userId);
    if (!member) return null;
    return { ...own, member: { id: memberBudgetId(row.orgId, row.userId), limitMicros: member.spendLimitMicros, period: member.spendPeriod } };
  }

  /**
   * Runs `change` (a transaction that NOTIFYs `payload` when it changed something) and, when it
   * did, answers only once this process heard its own notification back (every listener has been
   * sent it) plus a short grace: the caller then finds the key refused on every replica.
   */
  async function revokeEverywhere(payload: string, change: (tx: DbOrTx) => Promise<boolean>): Promise<boolean> {
    await ensureListening();
    const heard = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ECHO_WAIT_MS);
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      echoWaiters.set(payload, [...(echoWaiters.get(payload) ?? []), wake]);
    });
    let changed: boolean;
    try {
      changed = await db.transaction(async (tx) => {
        if (!(await change(tx))) return false;
        await ctx.database.notify(REVOKE_CHANNEL, payload, tx);
        return true;
      });
    } catch (err) {
      echoWaiters.delete(payload);
      throw err;
    }
    if (!changed) {
      echoWaiters.delete(payload);
      return false;
    }
    forget(payload);
    await heard;
    await sleep(REVOKE_GRACE_MS);
    return true;
  }

  /**
   * Runs `disable` (which marks the account disabled in `tx`) and drops every key of the account
   * from every replica's cache before answering; the lookups below refuse a disabled account's keys.
   */
  const refuseKeysOf = (userId: string, disable: (tx: DbOrTx) => Promise<boolean>) => revokeEverywhere(`${USER_PAYLOAD}${userId}`, disable);

  /** The same for every key of an organization (`change` deletes it) … */
  const refuseOrgKeys = (orgId: string, change: (tx: DbOrTx) => Promise<boolean>) => revokeEverywhere(`${ORG_PAYLOAD}${orgId}`, change);
  /** … or one member's keys of it (`change` removes the member, or changes its role or cap: the keys reload). */
  const refreshMemberKeys = (orgId: string, userId: string, change: (tx: DbOrTx) => Promise<boolean>) => revokeEverywhere(memberBudgetId(orgId, userId), change);

  async function callerForKey(key: string): Promise<Caller | null> {
    if (key.length !== API_KEY_PREFIX.length + 40) return null;
    await ensureListening();
    const hash = sha256Hex(key);
    const now = ctx.clock.now().getTime();
    // One turn of the event loop first: a revoke NOTIFY already sitting on the LISTEN socket is
    // processed before a cached key is trusted (setImmediate runs after pending I/O).
    await new Promise((resolve) => setImmediate(resolve));
    const cached = cache.get(hash);
    const fresh = cached && now - cached.at < CACHE_TTL_MS ? cached : null;
    let caller = fresh?.caller ?? null;
    let limits: KeySettings = fresh?.limits ?? { ...NO_LIMITS, capture: false };
    if (!caller) {
      const before = revokesHeard;
      const [row] = await db
        .select({ key: apiKeys, email: users.email, isAdmin: users.isAdmin })
        .from(apiKeys)
        .innerJoin(users, eq(users.id, apiKeys.userId))
        .where(and(eq(apiKeys.keyHash, hash), isNull(apiKeys.revokedAt), eq(users.disabled, false)))
        .limit(1);
      // A key of the other site is refused like an unknown one: a site's credentials are its own.
      if (!row || row.key.site !== ctx.config.site) return null;
      const settings = await settingsOf(row.key);
      if (!settings) return null;
      // An organization's key calls as the organization (its wallet pays), never with its creator's admin rights.
      caller = row.key.orgId
        ? { userId: row.key.orgId, email: row.email, isAdmin: false, via: 'key', sessionId: null, keyId: row.key.id, member: row.key.userId }
        : { userId: row.key.userId, email: row.email, isAdmin: row.isAdmin, via: 'key', sessionId: null, keyId: row.key.id };
      limits = settings;
      if (revokesHeard === before) {
        if (cache.size >= CACHE_MAX) {
          const [oldHash, oldest] = cache.entries().next().value!;
          cache.delete(oldHash);
          limitsByKey.delete(oldest.caller.keyId!);
        }
        cache.set(hash, { caller, limits, at: now, creator: row.key.userId, orgId: row.key.orgId });
        limitsByKey.set(caller.keyId!, limits);
      }
    }
    // An expired key is refused like a revoked one, wherever keys are accepted.
    if (limits.expiresAt && limits.expiresAt.getTime() <= now) return null;
    touch(caller.keyId!, now);
    return caller;
  }

  /** Records use at most once a minute per key, off the request path. */
  function touch(keyId: string, now: number) {
    if (now - (lastUsedWritten.get(keyId) ?? -Infinity) < LAST_USED_EVERY_MS) return;
    lastUsedWritten.set(keyId, now);
    const at = new Date(now);
    // The condition keeps other replicas from rewriting the row within the same minute.
    const write = db
      .update(apiKeys)
      .set({ lastUsedAt: at })
      .where(and(eq(apiKeys.id, keyId), or(isNull(apiKeys.lastUsedAt), lt(apiKeys.lastUsedAt, new Date(now - LAST_USED_EVERY_MS)))))
      .catch((err) => ctx.log.warn({ err, key_id: keyId }, 'could not record API key use'))
      .finally(() => pendingWrites.delete(write));
    pendingWrites.add(write);
  }

  return { revokeEverywhere, refuseKeysOf, refuseOrgKeys, refreshMemberKeys, callerForKey, limitsOf };
}

export type KeyCache = ReturnType<typeof createKeyCache>;

/**
 * API keys: `bfvk-` + 40 base62 characters, shown once, stored as SHA-256, scoped to the site
 * that issued them. Creating, listing, changing and revoking them, and their views; a change or
 * revoke reaches every process through the key cache (accounts.key-cache.ts).
 */
import { and, desc, eq, inArray, isNull, or } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';
import { sha256Hex } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { API_KEY_PREFIX } from '../../platform/http/auth';
import { newId, randomBase62 } from '../../platform/ids';
import { type KeyLimits, type KeyLimitsInput, type KeyPolicy, type LimitsView, type SpendPeriod, NO_LIMITS, applyLimits, limitsView } from '../metering';
import { type KeyCache, limitsOfRow } from './accounts.key-cache';
import type { OrgMembership } from './accounts.org-port';
import { apiKeys, users } from './accounts.tables';

export interface ApiKeyView extends LimitsView {
  id: string;
  prefix: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  capture: boolean;
  /** The organization whose wallet pays for the key; null: a personal key. */
  org_id: string | null;
  /** The account that made it (for an organization's key, the member). */
  created_by: string;
}

const limitsColumns = (l: KeyLimits) => ({ models: l.models, spendLimitMicros: l.spendLimitMicros, spendPeriod: l.spendPeriod, expiresAt: l.expiresAt, rpm: l.rpm });

/** For keys made without the router at hand (CLI, tests): no model can be named, nothing spent yet. */
const NO_MODELS: KeyPolicy = { isModel: () => false, spentBy: async () => new Map() };

/**
 * Names of a user's keys by id, revoked ones too (marked), for views of what a key did: usage
 * made with a key stays named after the key is revoked.
 */
export async function apiKeyNames(db: AppContext['database']['db'], userId: string, ids: string[]): Promise<Map<string, { name: string; revoked: boolean }>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select({ id: apiKeys.id, name: apiKeys.name, revokedAt: apiKeys.revokedAt })
    .from(apiKeys)
    // An organization's usage (userId an organization's id) names the organization's keys.
    .where(and(or(eq(apiKeys.userId, userId), eq(apiKeys.orgId, userId)), inArray(apiKeys.id, ids)));
  return new Map(rows.map((r) => [r.id, { name: r.name, revoked: r.revokedAt !== null }]));
}

const orgNotFound = () => new AppError('not_found', 'organization not found');

export function createApiKeyStore(ctx: AppContext, cache: KeyCache, orgs: () => OrgMembership) {
  const { db } = ctx.database;

  /** Who acts, as an organization's audit log names them (read before a transaction: PGlite has one connection). */
  async function actorOf(userId: string) {
    const [user] = await db.select({ email: users.email, phone: users.phone }).from(users).where(eq(users.id, userId)).limit(1);
    return { userId, email: user?.email ?? user?.phone ?? null };
  }

  /** The caller's role in the organization; 404 when not a member (a foreign organization is not told apart from a missing one). */
  async function requireMember(orgId: string, userId: string) {
    const member = await orgs().memberOf(orgId, userId);
    if (!member) throw orgNotFound();
    return member;
  }

  /**
   * `input`: a name, or a name with limits (checked against `policy`); with `org_id`, a key of that
   * organization (the caller must be a member), paid by its wallet.
   */
  async function createApiKey(userId: string, input: string | (KeyLimitsInput & { name: string; capture?: boolean; org_id?: string | null }), policy: KeyPolicy = NO_MODELS) {
    if (typeof input === 'string') input = { name: input };
    const orgId = input.org_id ?? null;
    if (orgId) await requireMember(orgId, userId);
    const now = ctx.clock.now();
    const limits = applyLimits(NO_LIMITS, input, policy, now, true);
    const key = `${API_KEY_PREFIX}${randomBase62(40)}`;
    const row = { id: newId('key'), userId, orgId, site: ctx.config.site, name: input.name, prefix: key.slice(0, 12), keyHash: sha256Hex(key), createdAt: now, capture: input.capture ?? false, ...limitsColumns(limits) };
    const actor = orgId ? await actorOf(userId) : null;
    await db.transaction(async (tx) => {
      await tx.insert(apiKeys).values(row);
      if (orgId && actor) await orgs().keyChanged(tx, { orgId, actor, action: 'org.key.create', keyId: row.id, name: row.name, createdBy: userId });
    });
    return { ...viewOf({ ...row, lastUsedAt: null, revokedAt: null }, 0n), key };
  }

  function viewOf(r: typeof apiKeys.$inferSelect, spent: bigint): ApiKeyView {
    return {
      id: r.id,
      prefix: r.prefix,
      name: r.name,
      created_at: r.createdAt.toISOString(),
      last_used_at: r.lastUsedAt?.toISOString() ?? null,
      capture: r.capture,
      org_id: r.orgId,
      created_by: r.userId,
      ...limitsView(limitsOfRow(r), spent),
    };
  }

  async function viewsWithSpent(rows: Array<typeof apiKeys.$inferSelect>, policy: KeyPolicy): Promise<ApiKeyView[]> {
    const spent = await policy.spentBy(
      rows.map((r) => ({ keyId: r.id, period: (r.spendPeriod as SpendPeriod | null) ?? 'total' })),
    );
    return rows.map((r) => viewOf(r, spent.get(r.id) ?? 0n));
  }

  /**
   * The caller's live personal keys; with `orgId`, the organization's keys the caller may see: a
   * member its own, owners and admins all of them.
   */
  async function listApiKeys(userId: string, policy: KeyPolicy, orgId?: string): Promise<ApiKeyView[]> {
    let whose = and(eq(apiKeys.userId, userId), isNull(apiKeys.orgId));
    if (orgId) {
      const { role } = await requireMember(orgId, userId);
      whose = role === 'member' ? and(eq(apiKeys.orgId, orgId), eq(apiKeys.userId, userId)) : eq(apiKeys.orgId, orgId);
    }
    const rows = await db
      .select()
      .from(apiKeys)
      .where(and(whose, eq(apiKeys.site, ctx.config.site), isNull(apiKeys.revokedAt)))
      .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id));
    return viewsWithSpent(rows, policy);
  }

  /**
   * Changes the caller's own key; a missing, foreign or revoked key is 404. Every replica drops its
   * cached copy before the answer (the same notification as a revoke), so new limits hold at once.
   */
  async function updateApiKey(userId: string, keyId: string, input: KeyLimitsInput & { name?: string; capture?: boolean }, policy: KeyPolicy): Promise<ApiKeyView> {
    const mine = and(eq(apiKeys.id, keyId), eq(apiKeys.userId, userId), eq(apiKeys.site, ctx.config.site), isNull(apiKeys.revokedAt));
    const [current] = await db.select().from(apiKeys).where(mine).limit(1);
    if (!current) throw new AppError('not_found', 'API key not found');
    const limits = applyLimits(limitsOfRow(current), input, policy, ctx.clock.now(), false);
    let updated: typeof apiKeys.$inferSelect | undefined;
    await cache.revokeEverywhere(keyId, async (tx) => {
      [updated] = await tx
        .update(apiKeys)
        .set({ ...(input.name !== undefined ? { name: input.name } : {}), ...(input.capture !== undefined ? { capture: input.capture } : {}), ...limitsColumns(limits) })
        .where(mine)
        .returning();
      return updated !== undefined;
    });
    if (!updated) throw new AppError('not_found', 'API key not found');
    return (await viewsWithSpent([updated], policy))[0]!;
  }

  /**
   * Revokes the caller's own key, or any key of an organization the caller owns or administers;
   * a missing, foreign or already revoked key is the same 404.
   */
  async function revokeApiKey(userId: string, keyId: string): Promise<void> {
    const [key] = await db.select({ userId: apiKeys.userId, orgId: apiKeys.orgId, name: apiKeys.name }).from(apiKeys).where(eq(apiKeys.id, keyId)).limit(1);
    const role = key?.orgId ? (await orgs().memberOf(key.orgId, userId))?.role : undefined;
    const mayRevoke = key !== undefined && (key.userId === userId || role === 'owner' || role === 'admin');
    const actor = key?.orgId ? await actorOf(userId) : null;
    const revoked = mayRevoke && (await cache.revokeEverywhere(keyId, async (tx) => {
      const rows = await tx
        .update(apiKeys)
        .set({ revokedAt: ctx.clock.now() })
        .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)))
        .returning({ id: apiKeys.id });
      if (rows.length && key.orgId && actor) await orgs().keyChanged(tx, { orgId: key.orgId, actor, action: 'org.key.revoke', keyId, name: key.name, createdBy: key.userId });
      return rows.length > 0;
    }));
    if (!revoked) throw new AppError('not_found', 'API key not found');
  }

  /** Revokes (in `tx`) every live key of an organization, or of one of its members. */
  async function revokeOrgKeys(tx: DbOrTx, orgId: string, userId?: string): Promise<number> {
    const rows = await tx
      .update(apiKeys)
      .set({ revokedAt: ctx.clock.now() })
      .where(and(eq(apiKeys.orgId, orgId), userId ? eq(apiKeys.userId, userId) : undefined, isNull(apiKeys.revokedAt)))
      .returning({ id: apiKeys.id });
    return rows.length;
  }

  /** Creators of keys by id (for an organization's report by member). */
  async function creatorsOf(keyIds: string[]): Promise<Map<string, string>> {
    if (keyIds.length === 0) return new Map();
    const rows = await db.select({ id: apiKeys.id, userId: apiKeys.userId }).from(apiKeys).where(inArray(apiKeys.id, keyIds));
    return new Map(rows.map((r) => [r.id, r.userId]));
  }

  return { createApiKey, listApiKeys, updateApiKey, revokeApiKey, revokeOrgKeys, creatorsOf };
}

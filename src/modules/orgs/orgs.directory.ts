/**
 * Organizations as the platform sees them, without a member's point of view: the platform
 * admin's list and detail, and who hears of an organization's money (its owners and admins).
 * Only live organizations of this site; another one is the same 404 as a missing one.
 */
import { and, count, desc, eq, ilike, inArray, isNotNull, isNull, or } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { decodeCursor, olderThan, page } from '../../platform/cursor';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { orgMembers, organizations } from './orgs.tables';

export function createOrgDirectory(ctx: AppContext) {
  const { db } = ctx.database;
  const { site, currency } = ctx.config;
  const live = and(eq(organizations.site, site), isNull(organizations.deletedAt));

  async function memberCounts(orgIds: string[]) {
    if (!orgIds.length) return new Map<string, number>();
    const rows = await db.select({ orgId: orgMembers.orgId, n: count() }).from(orgMembers).where(inArray(orgMembers.orgId, orgIds)).groupBy(orgMembers.orgId);
    return new Map(rows.map((r) => [r.orgId, Number(r.n)]));
  }

  /** Newest first; `q` matches the name or the id. */
  async function list(query: { q?: string; limit: number; cursor?: string }) {
    const pattern = query.q ? `%${query.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : null;
    const rows = await db
      .select({ id: organizations.id, name: organizations.name, createdAt: organizations.createdAt })
      .from(organizations)
      .where(
        and(
          live,
          pattern ? or(ilike(organizations.name, pattern), ilike(organizations.id, pattern)) : undefined,
          olderThan(organizations, organizations.createdAt, organizations.id, decodeCursor(query.cursor)),
        ),
      )
      .orderBy(desc(organizations.createdAt), desc(organizations.id))
      .limit(query.limit + 1);
    const { items, nextCursor } = page(rows, query.limit);
    const counts = await memberCounts(items.map((r) => r.id));
    return { orgs: items.map((r) => ({ id: r.id, name: r.name, currency, member_count: counts.get(r.id) ?? 0, created_at: r.createdAt.toISOString() })), next_cursor: nextCursor };
  }

  /** One organization with its members (user ids and roles); 404 when there is none. */
  async function get(orgId: string) {
    const [org] = await db.select().from(organizations).where(and(live, eq(organizations.id, orgId)));
    if (!org) throw new AppError('not_found', 'organization not found');
    const members = await db.select().from(orgMembers).where(eq(orgMembers.orgId, orgId)).orderBy(orgMembers.joinedAt, orgMembers.userId);
    return {
      id: org.id,
      name: org.name,
      currency,
      member_count: members.length,
      created_at: org.createdAt.toISOString(),
      members: members.map((m) => ({ user_id: m.userId, role: m.role, joined_at: m.joinedAt.toISOString() })),
    };
  }

  /**
   * 404 unless the organization is live; in `tx`, its row stays share-locked until the caller
   * commits, so a wallet change made there and the organization's deletion (which locks the row,
   * then requires an empty wallet) happen one after the other: no money lands in a deleted one.
   */
  async function requireLive(orgId: string, tx: DbOrTx) {
    const [org] = await tx.select({ id: organizations.id }).from(organizations).where(and(live, eq(organizations.id, orgId))).for('share');
    if (!org) throw new AppError('not_found', 'organization not found');
  }

  /** The organization's name and its owners and admins (who hear of its money); null when it is gone. */
  async function managers(orgId: string): Promise<{ name: string; userIds: string[] } | null> {
    const rows = await db
      .select({ name: organizations.name, userId: orgMembers.userId })
      .from(organizations)
      .innerJoin(orgMembers, eq(orgMembers.orgId, organizations.id))
      .where(and(live, eq(organizations.id, orgId), inArray(orgMembers.role, ['owner', 'admin'])));
    return rows.length ? { name: rows[0]!.name, userIds: rows.map((r) => r.userId) } : null;
  }

  /** Live organizations among `ids` (wallet ids of any kind) with a low-balance threshold. */
  async function lowBalanceWatch(ids: string[]) {
    if (!ids.length) return [];
    const rows = await db
      .select({ id: organizations.id, threshold: organizations.lowBalanceMicros, notifiedAt: organizations.lowBalanceNotifiedAt })
      .from(organizations)
      .where(and(live, inArray(organizations.id, ids), isNotNull(organizations.lowBalanceMicros)));
    return rows.map((r) => ({ id: r.id, thresholdMicros: r.threshold!, notified: r.notifiedAt !== null }));
  }

  async function markLowBalance(orgId: string, thresholdMicros: bigint, notified: boolean) {
    const changed = await db
      .update(organizations)
      .set({ lowBalanceNotifiedAt: notified ? ctx.clock.now() : null })
      .where(
        and(
          eq(organizations.id, orgId),
          eq(organizations.lowBalanceMicros, thresholdMicros),
          notified ? isNull(organizations.lowBalanceNotifiedAt) : isNotNull(organizations.lowBalanceNotifiedAt),
        ),
      )
      .returning({ id: organizations.id });
    return changed.length > 0;
  }

  return { list, get, requireLive, managers, lowBalanceWatch, markLowBalance };
}

export type OrgDirectory = ReturnType<typeof createOrgDirectory>;

/**
 * Organizations: a wallet of the site's currency shared by members with roles (owner > admin >
 * member). Billing keys the wallet by the organization's id where it keys a personal one by a
 * user's, so the ledger, holds, payments, invoices and receipts work on it unchanged; the accounts
 * module makes and revokes the organization's keys (through the functions it exports) and asks
 * this module, through its OrgMembership port, whether a key's creator is still a member and
 * what the member may spend.
 *
 * Every change is an audit entry whose target is the organization (its owners and admins read
 * them; the platform admin reads them among all others). Changes to members run under a lock of
 * the organization's row, so two concurrent changes cannot leave it without an owner.
 */
import { and, count, desc, eq, gt, isNull } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import type { AccountsService, OrgMember, OrgMembership, OrgRole } from '../accounts';
import type { AuditService } from '../audit';
import type { KeyPolicy, SpendPeriod } from '../metering';
import { memberBudgetId } from '../metering';
import { randomBytes, sha256Hex } from '../../platform/crypto';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { exactMajorToMicros, microsToDecimal } from '../../platform/money';
import { orgInvites, orgMembers, organizations } from './orgs.tables';

const INVITE_TTL_MS = 7 * 24 * 3600_000;
/** Invitations an organization may send a day: each is a mail to any address, so a bound keeps the site from relaying spam. */
const INVITES_PER_DAY = 100;

export interface OrgsDeps {
  accounts: Pick<AccountsService, 'emailsOf' | 'email' | 'removeOrgMember' | 'changeOrgMember' | 'deleteOrgKeys'>;
  audit: AuditService;
  /** Wallet balances by owner id (billing). */
  balances(ownerIds: string[], on?: DbOrTx): Promise<Map<string, bigint>>;
  /** Spent by budget ids in their periods (the router's key spend rollup, where members' spend is counted too). */
  spentBy: KeyPolicy['spentBy'];
}

/** Who acts: the signed-in account. */
export interface Actor {
  userId: string;
  email: string | null;
}

export interface MemberPatch {
  role?: OrgRole;
  spend_limit?: number | null;
  spend_period?: SpendPeriod | null;
}

const notFound = () => new AppError('not_found', 'organization not found');
const isManager = (role: OrgRole) => role === 'owner' || role === 'admin';
const NEEDS_OWNER = 'an organization needs at least one owner';

type InviteRow = typeof orgInvites.$inferSelect;
type InviteStatus = 'pending' | 'accepted' | 'revoked' | 'expired';

export function createOrgsService(ctx: AppContext, deps: OrgsDeps) {
  const { db } = ctx.database;
  const { site, currency } = ctx.config;
  const live = (orgId: string) => and(eq(organizations.id, orgId), eq(organizations.site, site), isNull(organizations.deletedAt));
  const inviteLink = (token: string) => `${ctx.config.publicUrl.replace(/\/$/, '')}/console/#/invite?token=${encodeURIComponent(token)}`;

  async function memberOf(orgId: string, userId: string, on: DbOrTx = db): Promise<OrgMember | null> {
    const [row] = await on
      .select({ role: orgMembers.role, spendLimitMicros: orgMembers.spendLimitMicros, spendPeriod: orgMembers.spendPeriod })
      .from(orgMembers)
      .innerJoin(organizations, eq(organizations.id, orgMembers.orgId))
      .where(and(live(orgId), eq(orgMembers.userId, userId)))
      .limit(1);
    return row ? { role: row.role as OrgRole, spendLimitMicros: row.spendLimitMicros, spendPeriod: row.spendPeriod as SpendPeriod | null } : null;
  }

  /** The caller's membership; 404 for a non-member (a foreign organization is not told apart from a missing one). */
  async function requireMember(orgId: string, userId: string, on: DbOrTx = db): Promise<OrgMember> {
    const member = await memberOf(orgId, userId, on);
    if (!member) throw notFound();
    return member;
  }

  /** Owners and admins only: 403 for a member, 404 for anyone else. */
  async function requireManager(orgId: string, userId: string, on: DbOrTx = db): Promise<OrgMember> {
    const member = await requireMember(orgId, userId, on);
    if (!isManager(member.role)) throw new AppError('forbidden', 'only owners and admins may do this');
    return member;
  }

  /** Locks the organization's row for a change of its members (and answers 404 when it is gone). */
  async function lockOrg(tx: DbOrTx, orgId: string) {
    const [row] = await tx.select({ id: organizations.id, name: organizations.name }).from(organizations).where(live(orgId)).for('update');
    if (!row) throw notFound();
    return row;
  }

  const record = (tx: DbOrTx, actor: Actor, orgId: string, action: string, details: Record<string, unknown> = {}) =>
    deps.audit.record({ actor: { userId: actor.userId, email: actor.email }, action, target: orgId, details }, tx);

  async function views(userId: string, orgId?: string) {
    const memberCount = db.select({ orgId: orgMembers.orgId, n: count().as('n') }).from(orgMembers).groupBy(orgMembers.orgId).as('member_count');
    const rows = await db
      .select({ id: organizations.id, name: organizations.name, createdAt: organizations.createdAt, role: orgMembers.role, n: memberCount.n })
      .from(orgMembers)
      .innerJoin(organizations, eq(organizations.id, orgMembers.orgId))
      .innerJoin(memberCount, eq(memberCount.orgId, organizations.id))
      .where(and(eq(orgMembers.userId, userId), eq(organizations.site, site), isNull(organizations.deletedAt), orgId ? eq(organizations.id, orgId) : undefined))
      .orderBy(desc(organizations.createdAt), desc(organizations.id));
    return rows.map((r) => ({ id: r.id, name: r.name, currency, role: r.role as OrgRole, member_count: Number(r.n), created_at: r.createdAt.toISOString() }));
  }

  async function get(userId: string, orgId: string) {
    const [view] = await views(userId, orgId);
    if (!view) throw notFound();
    return view;
  }

  async function create(actor: Actor, name: string) {
    const id = newId('org');
    const now = ctx.clock.now();
    await db.transaction(async (tx) => {
      await tx.insert(organizations).values({ id, name, site, createdAt: now });
      await tx.insert(orgMembers).values({ orgId: id, userId: actor.userId, role: 'owner', joinedAt: now });
      await record(tx, actor, id, 'org.create', { name });
    });
    return get(actor.userId, id);
  }

  async function rename(actor: Actor, orgId: string, name: string) {
    await db.transaction(async (tx) => {
      await lockOrg(tx, orgId);
      await requireManager(orgId, actor.userId, tx);
      await tx.update(organizations).set({ name }).where(eq(organizations.id, orgId));
      await record(tx, actor, orgId, 'org.update', { name });
    });
    return get(actor.userId, orgId);
  }

  /** Owners only, with an empty wallet; every key of the organization is revoked on every replica. */
  async function remove(actor: Actor, orgId: string) {
    const { role } = await requireMember(orgId, actor.userId);
    if (role !== 'owner') throw new AppError('forbidden', 'only owners may delete an organization');
    await deps.accounts.deleteOrgKeys(orgId, async (tx) => {
      await lockOrg(tx, orgId);
      // Read under the lock: a top-up credited before it is seen here; one credited after finds the organization gone.
      if (((await deps.balances([orgId], tx)).get(orgId) ?? 0n) !== 0n) throw new AppError('conflict', "the organization's wallet is not empty");
      const now = ctx.clock.now();
      await tx.update(organizations).set({ deletedAt: now }).where(eq(organizations.id, orgId));
      await tx.update(orgInvites).set({ revokedAt: now }).where(and(eq(orgInvites.orgId, orgId), isNull(orgInvites.acceptedAt), isNull(orgInvites.revokedAt)));
      await record(tx, actor, orgId, 'org.delete');
      return true;
    });
  }

  async function members(userId: string, orgId: string) {
    await requireMember(orgId, userId);
    const rows = await db.select().from(orgMembers).where(eq(orgMembers.orgId, orgId)).orderBy(orgMembers.joinedAt, orgMembers.userId);
    const [emails, spent] = await Promise.all([
      deps.accounts.emailsOf(rows.map((r) => r.userId)),
      deps.spentBy(rows.map((r) => ({ keyId: memberBudgetId(orgId, r.userId), period: (r.spendPeriod as SpendPeriod | null) ?? 'total' }))),
    ]);
    return { members: rows.map((r) => memberView(r, emails.get(r.userId) ?? null, spent.get(memberBudgetId(orgId, r.userId)) ?? 0n)) };
  }

  function memberView(r: typeof orgMembers.$inferSelect, email: string | null, spent: bigint) {
    return {
      user_id: r.userId,
      email,
      role: r.role as OrgRole,
      spend_limit: r.spendLimitMicros === null ? null : microsToDecimal(r.spendLimitMicros),
      spend_period: r.spendPeriod as SpendPeriod | null,
      spent: microsToDecimal(spent),
      joined_at: r.joinedAt.toISOString(),
    };
  }

  async function ownerCount(tx: DbOrTx, orgId: string): Promise<number> {
    const [row] = await tx.select({ n: count() }).from(orgMembers).where(and(eq(orgMembers.orgId, orgId), eq(orgMembers.role, 'owner')));
    return Number(row?.n ?? 0);
  }

  /** The cap's columns after a patch: a limit without a period counts over the member's whole membership (total). */
  function capOf(current: typeof orgMembers.$inferSelect, patch: MemberPatch) {
    let limit = current.spendLimitMicros;
    if (patch.spend_limit !== undefined) {
      limit = patch.spend_limit === null ? null : exactMajorToMicros(patch.spend_limit);
      if (patch.spend_limit !== null && limit === null) throw new AppError('invalid', 'spend_limit has more than 6 decimals or is too large');
    }
    if (limit === null) {
      if (patch.spend_period) throw new AppError('invalid', 'spend_period needs a spend_limit');
      return { spendLimitMicros: null, spendPeriod: null };
    }
    const period = patch.spend_period ?? (current.spendPeriod as SpendPeriod | null) ?? 'total';
    return { spendLimitMicros: limit, spendPeriod: period };
  }

  /**
   * Owners and admins change a member's role or cap; only owners touch an owner or make one, and
   * the last owner stays one (409). Every replica reloads the member's keys (their cap) before the answer.
   */
  async function updateMember(actor: Actor, orgId: string, userId: string, patch: MemberPatch) {
    let updated: typeof orgMembers.$inferSelect | undefined;
    await deps.accounts.changeOrgMember(orgId, userId, async (tx) => {
      await lockOrg(tx, orgId);
      const me = await requireManager(orgId, actor.userId, tx);
      const [current] = await tx.select().from(orgMembers).where(and(eq(orgMembers.orgId, orgId), eq(orgMembers.userId, userId))).limit(1);
      if (!current) throw new AppError('not_found', 'member not found');
      const role = patch.role ?? (current.role as OrgRole);
      if (current.role === 'owner' && me.role !== 'owner') throw new AppError('forbidden', 'only owners may change an owner');
      if (role === 'owner' && current.role !== 'owner' && me.role !== 'owner') throw new AppError('forbidden', 'only owners may make owners');
      if (current.role === 'owner' && role !== 'owner' && (await ownerCount(tx, orgId)) <= 1) throw new AppError('conflict', NEEDS_OWNER);
      const cap = capOf(current, patch);
      [updated] = await tx
        .update(orgMembers)
        .set({ role, ...cap })
        .where(and(eq(orgMembers.orgId, orgId), eq(orgMembers.userId, userId)))
        .returning();
      await record(tx, actor, orgId, 'org.member.update', {
        user_id: userId,
        ...(role !== current.role ? { role, previous_role: current.role } : {}),
        spend_limit: cap.spendLimitMicros === null ? null : microsToDecimal(cap.spendLimitMicros),
        spend_period: cap.spendPeriod,
      });
      return true;
    });
    const emails = await deps.accounts.emailsOf([userId]);
    const [spent] = (await deps.spentBy([{ keyId: memberBudgetId(orgId, userId), period: (updated!.spendPeriod as SpendPeriod | null) ?? 'total' }])).values();
    return memberView(updated!, emails.get(userId) ?? null, spent ?? 0n);
  }

  /**
   * Owners and admins remove members (only owners remove owners); anyone may leave. The last owner
   * cannot (409). The member's keys of the organization are revoked on every replica before the answer.
   */
  async function removeMember(actor: Actor, orgId: string, userId: string) {
    const removed = await deps.accounts.removeOrgMember(orgId, userId, async (tx) => {
      await lockOrg(tx, orgId);
      const me = await requireMember(orgId, actor.userId, tx);
      const self = actor.userId === userId;
      if (!self && !isManager(me.role)) throw new AppError('forbidden', 'only owners and admins may remove members');
      const [current] = await tx.select().from(orgMembers).where(and(eq(orgMembers.orgId, orgId), eq(orgMembers.userId, userId))).limit(1);
      if (!current) return false;
      if (current.role === 'owner' && !self && me.role !== 'owner') throw new AppError('forbidden', 'only owners may remove an owner');
      if (current.role === 'owner' && (await ownerCount(tx, orgId)) <= 1) throw new AppError('conflict', NEEDS_OWNER);
      await tx.delete(orgMembers).where(and(eq(orgMembers.orgId, orgId), eq(orgMembers.userId, userId)));
      await record(tx, actor, orgId, self ? 'org.member.leave' : 'org.member.remove', { user_id: userId, role: current.role });
      return true;
    });
    if (!removed) throw new AppError('not_found', 'member not found');
  }

  function inviteView(r: InviteRow, link?: string) {
    const now = ctx.clock.now().getTime();
    const status: InviteStatus = r.acceptedAt ? 'accepted' : r.revokedAt ? 'revoked' : r.expiresAt.getTime() <= now ? 'expired' : 'pending';
    return { id: r.id, email: r.email, role: r.role as OrgRole, status, expires_at: r.expiresAt.toISOString(), created_at: r.createdAt.toISOString(), ...(link ? { link } : {}) };
  }

  /** Owners and admins invite (only owners invite owners); the link is mailed, or answered when no mail is configured. */
  async function invite(actor: Actor, orgId: string, input: { email: string; role: OrgRole }) {
    const token = randomBytes(32).toString('base64url');
    const now = ctx.clock.now();
    const email = input.email.trim().toLowerCase();
    let row: InviteRow | undefined;
    let orgName = '';
    await db.transaction(async (tx) => {
      orgName = (await lockOrg(tx, orgId)).name;
      const me = await requireManager(orgId, actor.userId, tx);
      if (input.role === 'owner' && me.role !== 'owner') throw new AppError('forbidden', 'only owners may invite owners');
      const [sent] = await tx
        .select({ n: count() })
        .from(orgInvites)
        .where(and(eq(orgInvites.orgId, orgId), gt(orgInvites.createdAt, new Date(now.getTime() - 24 * 3600_000))));
      if (Number(sent?.n ?? 0) >= INVITES_PER_DAY) throw new AppError('rate_limited', `an organization may send ${INVITES_PER_DAY} invitations a day`);
      [row] = await tx
        .insert(orgInvites)
        .values({ id: newId('ivt'), orgId, email, role: input.role, tokenHash: sha256Hex(token), invitedBy: actor.userId, createdAt: now, expiresAt: new Date(now.getTime() + INVITE_TTL_MS) })
        .returning();
      await record(tx, actor, orgId, 'org.invite', { invite_id: row!.id, email, role: input.role });
    });
    const link = inviteLink(token);
    const mailed = await deps.accounts.email.orgInvite(email, { org: orgName, inviter: actor.email ?? actor.userId, role: input.role, link });
    return inviteView(row!, mailed ? undefined : link);
  }

  async function invites(userId: string, orgId: string) {
    await requireManager(orgId, userId);
    const rows = await db
      .select()
      .from(orgInvites)
      .where(and(eq(orgInvites.orgId, orgId), isNull(orgInvites.acceptedAt), isNull(orgInvites.revokedAt), gt(orgInvites.expiresAt, ctx.clock.now())))
      .orderBy(desc(orgInvites.createdAt), desc(orgInvites.id));
    return { invites: rows.map((r) => inviteView(r)) };
  }

  async function revokeInvite(actor: Actor, orgId: string, inviteId: string) {
    await db.transaction(async (tx) => {
      await lockOrg(tx, orgId);
      await requireManager(orgId, actor.userId, tx);
      const rows = await tx
        .update(orgInvites)
        .set({ revokedAt: ctx.clock.now() })
        .where(and(eq(orgInvites.id, inviteId), eq(orgInvites.orgId, orgId), isNull(orgInvites.acceptedAt), isNull(orgInvites.revokedAt)))
        .returning({ email: orgInvites.email });
      if (!rows.length) throw new AppError('not_found', 'invite not found');
      await record(tx, actor, orgId, 'org.invite.revoke', { invite_id: inviteId, email: rows[0]!.email });
    });
  }

  /** The signed-in account joins with the invite's role (once; a member already keeps its role). */
  async function accept(actor: Actor, token: string) {
    const invalid = () => new AppError('invalid', 'invalid invite');
    const orgId = await db.transaction(async (tx) => {
      const now = ctx.clock.now();
      const [used] = await tx
        .update(orgInvites)
        .set({ acceptedAt: now, acceptedBy: actor.userId })
        .where(and(eq(orgInvites.tokenHash, sha256Hex(token)), isNull(orgInvites.acceptedAt), isNull(orgInvites.revokedAt), gt(orgInvites.expiresAt, now)))
        .returning();
      if (!used) throw invalid();
      const [org] = await tx.select({ id: organizations.id }).from(organizations).where(live(used.orgId)).for('update');
      if (!org) throw invalid();
      const joined = await tx
        .insert(orgMembers)
        .values({ orgId: used.orgId, userId: actor.userId, role: used.role, joinedAt: now })
        .onConflictDoNothing()
        .returning({ role: orgMembers.role });
      await record(tx, actor, used.orgId, 'org.invite.accept', { invite_id: used.id, user_id: actor.userId, role: joined.length ? used.role : 'unchanged' });
      return used.orgId;
    });
    return get(actor.userId, orgId);
  }

  async function auditLog(userId: string, orgId: string, query: { limit?: number; cursor?: string }) {
    await requireManager(orgId, userId);
    const { entries, next_cursor } = await deps.audit.list({ limit: query.limit ?? 50, cursor: query.cursor, target: orgId });
    return { entries: entries.map(({ actor_id: _, ...e }) => e), next_cursor };
  }

  /**
   * The wallet a billing or usage request reads: the caller's own, or (`orgId`) the organization's,
   * which only its owners and admins see (403 for a member, 404 for anyone else).
   */
  async function walletOf(userId: string, orgId: string | undefined): Promise<string> {
    if (!orgId) return userId;
    await requireManager(orgId, userId);
    return orgId;
  }

  const membership: OrgMembership = {
    memberOf: (orgId, userId) => memberOf(orgId, userId),
    keyChanged: (on, change) => record(on, change.actor, change.orgId, change.action, { key_id: change.keyId, name: change.name, created_by: change.createdBy }),
  };

  return { membership, walletOf, create, list: async (userId: string) => ({ orgs: await views(userId) }), get, rename, remove, members, updateMember, removeMember, invite, invites, revokeInvite, accept, auditLog };
}

export type OrgsService = ReturnType<typeof createOrgsService>;

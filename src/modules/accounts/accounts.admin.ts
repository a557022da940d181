/**
 * Operating accounts: the admin user list and detail, disabling, promoting, setting a password.
 * Disabling ends the account's sessions and drops its keys from every replica's cache before it
 * answers (the key store's revocation NOTIFY); a disabled account cannot sign in.
 */
import { and, count, desc, eq, gt, isNull, or, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { decodeCursor, olderThan, page } from '../../platform/cursor';
import { AppError } from '../../platform/errors';
import type { KeyCache } from './accounts.key-cache';
import { hashPassword } from './accounts.passwords';
import { apiKeys, sessions, users } from './accounts.tables';

export interface AdminUserRow {
  id: string;
  email: string | null;
  phone: string | null;
  is_admin: boolean;
  disabled: boolean;
  created_at: string;
}

export interface UserFlags {
  disabled?: boolean;
  is_admin?: boolean;
}

type Row = typeof users.$inferSelect;
const rowView = (r: Row): AdminUserRow => ({
  id: r.id,
  email: r.email,
  phone: r.phone,
  is_admin: r.isAdmin,
  disabled: r.disabled,
  created_at: r.createdAt.toISOString(),
});

/** `q` as a literal substring for LIKE: its own %, _ and \ match themselves. */
const likeLiteral = (q: string) => `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export function checkPassword(password: string) {
  if (password.length < 8 || password.length > 128) throw new AppError('invalid', 'password must be 8 to 128 characters');
}

export function createUserAdmin(ctx: AppContext, keys: KeyCache) {
  const { db } = ctx.database;

  async function listUsers(query: { q?: string; limit: number; cursor?: string }) {
    const after = decodeCursor(query.cursor);
    const q = query.q?.trim();
    // Phone numbers are stored normalized: the digits of q (and a +) are what can match one.
    const phone = q?.replace(/[\s().-]/g, '');
    const byPhone = phone && /^\+?\d+$/.test(phone) ? sql`${users.phone} like ${likeLiteral(phone)}` : undefined;
    const rows = await db
      .select()
      .from(users)
      .where(
        and(
          q ? or(sql`${users.email} ilike ${likeLiteral(q)}`, byPhone) : undefined,
          olderThan(users, users.createdAt, users.id, after),
        ),
      )
      .orderBy(desc(users.createdAt), desc(users.id))
      .limit(query.limit + 1);
    const { items, nextCursor } = page(rows, query.limit);
    return { users: items.map(rowView), next_cursor: nextCursor };
  }

  async function requireUser(id: string): Promise<Row> {
    const [row] = await db.select().from(users).where(eq(users.id, id)).limit(1);
    if (!row) throw new AppError('not_found', 'user not found');
    return row;
  }

  /** One account with its live sessions, active keys of this site and last sign-in. */
  async function getUserDetail(id: string) {
    const row = await requireUser(id);
    const [[s], [k]] = await Promise.all([
      db.select({ n: count() }).from(sessions).where(and(eq(sessions.userId, id), gt(sessions.expiresAt, ctx.clock.now()))),
      db.select({ n: count() }).from(apiKeys).where(and(eq(apiKeys.userId, id), eq(apiKeys.site, ctx.config.site), isNull(apiKeys.revokedAt))),
    ]);
    return { ...rowView(row), sessions_count: s?.n ?? 0, keys_count: k?.n ?? 0, last_login_at: row.lastLoginAt?.toISOString() ?? null };
  }

  /**
   * Sets disabled / is_admin. An admin cannot disable or demote itself (409): the last admin could
   * lock everyone out. Disabling ends the sessions and refuses the keys on every replica before it
   * answers. Answers the account before and after, for the audit entry.
   */
  async function updateUser(actorId: string | null, id: string, flags: UserFlags) {
    const before = await requireUser(id);
    if (id === actorId && (flags.disabled === true || flags.is_admin === false))
      throw new AppError('conflict', 'you cannot disable or demote your own account');
    const set = { ...(flags.disabled !== undefined ? { disabled: flags.disabled } : {}), ...(flags.is_admin !== undefined ? { isAdmin: flags.is_admin } : {}) };
    if (flags.disabled === true) {
      await keys.refuseKeysOf(id, async (tx) => {
        await tx.update(users).set(set).where(eq(users.id, id));
        await tx.delete(sessions).where(eq(sessions.userId, id));
        return true;
      });
    } else if (Object.keys(set).length > 0) {
      await db.update(users).set(set).where(eq(users.id, id));
    }
    return { before: rowView(before), after: rowView(await requireUser(id)) };
  }

  /** Sets a new password and ends every session of the account (sessions are not cached: at once, everywhere). */
  async function setPassword(id: string, password: string): Promise<void> {
    checkPassword(password);
    await requireUser(id);
    const passwordHash = await hashPassword(password);
    await db.transaction(async (tx) => {
      await tx.update(users).set({ passwordHash }).where(eq(users.id, id));
      await tx.delete(sessions).where(eq(sessions.userId, id));
    });
  }

  return { listUsers, getUserDetail, updateUser, setPassword, requireUser };
}

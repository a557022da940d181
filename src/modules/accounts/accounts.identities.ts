/**
 * The provider identities linked to an account, and unlinking them. The last way to sign in is
 * never removed: the ways are a password, each identity, and a phone when SMS codes are on.
 */
import { and, asc, count, eq } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { userIdentities, users } from './accounts.tables';

export function createIdentities(ctx: AppContext) {
  const { db } = ctx.database;

  async function list(userId: string) {
    const rows = await db
      .select()
      .from(userIdentities)
      .where(eq(userIdentities.userId, userId))
      .orderBy(asc(userIdentities.createdAt), asc(userIdentities.id));
    return rows.map((r) => ({ id: r.id, provider: r.provider, email: r.email, created_at: r.createdAt.toISOString() }));
  }

  async function unlink(userId: string, identityId: string): Promise<void> {
    // The account row is locked, so two unlinks at once cannot each leave the other as the last way.
    await db.transaction(async (tx) => {
      const [user] = await tx
        .select({ passwordHash: users.passwordHash, phone: users.phone })
        .from(users)
        .where(eq(users.id, userId))
        .for('update');
      const [identity] = await tx
        .select({ id: userIdentities.id })
        .from(userIdentities)
        .where(and(eq(userIdentities.id, identityId), eq(userIdentities.userId, userId)));
      if (!user || !identity) throw new AppError('not_found', 'identity not found');
      const [linked] = await tx.select({ n: count() }).from(userIdentities).where(eq(userIdentities.userId, userId));
      const ways = (user.passwordHash ? 1 : 0) + (linked?.n ?? 0) + (user.phone && ctx.config.accounts.sms ? 1 : 0);
      if (ways <= 1) throw new AppError('conflict', 'this is your last way to sign in: set a password or link another provider first');
      await tx.delete(userIdentities).where(eq(userIdentities.id, identityId));
    });
  }

  return { list, unlink };
}

/**
 * Accounts: users, session tokens and API keys. Secrets are random and stored only as SHA-256.
 */
import { randomBytes } from 'node:crypto';
import { hash, verify, Algorithm } from '@node-rs/argon2';
import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import type { AppContext } from '../../platform/context';
import { sha256Hex } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import type { Caller, CallerResolver } from '../../platform/http/auth';
import { API_KEY_PREFIX } from '../../platform/http/auth';
import { newId, randomBase62 } from '../../platform/ids';
import { apiKeys, sessions, users } from './accounts.tables';

/** OWASP argon2id parameters (m = 19 MiB, t = 2, p = 1); @node-rs/argon2's default is 4 MiB. */
export const ARGON2_OPTIONS = { algorithm: Algorithm.Argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export interface UserView {
  id: string;
  email: string;
}

export function createAccountsService(ctx: AppContext) {
  const { db } = ctx.database;

  async function createUser(input: { email: string; password: string; phone?: string | null; isAdmin?: boolean }): Promise<UserView> {
    const passwordHash = await hash(input.password, ARGON2_OPTIONS);
    const id = newId('usr');
    const email = input.email.trim();
    const inserted = await db
      .insert(users)
      .values({ id, email, phone: input.phone ?? null, passwordHash, isAdmin: input.isAdmin ?? false })
      .onConflictDoNothing()
      .returning({ id: users.id, email: users.email });
    if (inserted.length === 0) throw new AppError('conflict', 'an account with this email or phone already exists');
    return inserted[0]!;
  }

  async function createSession(userId: string, meta: { userAgent?: string | null; ip?: string | null } = {}) {
    const token = randomBytes(32).toString('base64url');
    const now = ctx.clock.now();
    const row = {
      id: newId('ses'),
      userId,
      tokenHash: sha256Hex(token),
      createdAt: now,
      expiresAt: new Date(now.getTime() + ctx.config.sessionTtlMs),
      userAgent: meta.userAgent ?? null,
      ip: meta.ip ?? null,
    };
    await db.insert(sessions).values(row);
    return { token, session: row };
  }

  async function createApiKey(userId: string, name: string) {
    const key = `${API_KEY_PREFIX}${randomBase62(40)}`;
    const row = {
      id: newId('key'),
      userId,
      site: ctx.config.site,
      name,
      prefix: key.slice(0, 12),
      keyHash: sha256Hex(key),
      createdAt: ctx.clock.now(),
    };
    await db.insert(apiKeys).values(row);
    return { id: row.id, key, prefix: row.prefix, name, created_at: row.createdAt.toISOString(), last_used_at: null };
  }

  const resolver: CallerResolver = {
    async callerForSession(token) {
      const [row] = await db
        .select({ sessionId: sessions.id, userId: users.id, email: users.email, isAdmin: users.isAdmin })
        .from(sessions)
        .innerJoin(users, eq(users.id, sessions.userId))
        .where(and(eq(sessions.tokenHash, sha256Hex(token)), gt(sessions.expiresAt, ctx.clock.now())))
        .limit(1);
      if (!row) return null;
      return { userId: row.userId, email: row.email, isAdmin: row.isAdmin, via: 'session', sessionId: row.sessionId, keyId: null } satisfies Caller;
    },
    async callerForKey(key) {
      const [row] = await db
        .select({ keyId: apiKeys.id, site: apiKeys.site, userId: users.id, email: users.email, isAdmin: users.isAdmin })
        .from(apiKeys)
        .innerJoin(users, eq(users.id, apiKeys.userId))
        .where(and(eq(apiKeys.keyHash, sha256Hex(key)), isNull(apiKeys.revokedAt)))
        .limit(1);
      if (!row || row.site !== ctx.config.site) return null;
      return { userId: row.userId, email: row.email, isAdmin: row.isAdmin, via: 'key', sessionId: null, keyId: row.keyId } satisfies Caller;
    },
  };

  async function getUser(userId: string): Promise<UserView | null> {
    const [row] = await db.select({ id: users.id, email: users.email }).from(users).where(eq(users.id, userId)).limit(1);
    return row ?? null;
  }

  /** Emails by user id, for reports (router cost rows show the account's email). */
  async function emailsOf(userIds: string[]): Promise<Map<string, string>> {
    if (userIds.length === 0) return new Map();
    const rows = await db
      .select({ id: users.id, email: users.email })
      .from(users)
      .where(sql`${users.id} in ${userIds}`);
    return new Map(rows.map((r) => [r.id, r.email]));
  }

  return { createUser, createSession, createApiKey, getUser, emailsOf, resolver, verifyPassword: verify };
}

export type AccountsService = ReturnType<typeof createAccountsService>;

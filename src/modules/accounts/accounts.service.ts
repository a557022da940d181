/**
 * Accounts: users, login (password, then TOTP when enabled), session tokens and API keys.
 * Secrets are random (256 bits for sessions and challenges) and stored only as SHA-256.
 */
import { and, desc, eq, gt, inArray, lte, ne, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { randomBytes, sha256Hex } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import type { Caller, CallerResolver } from '../../platform/http/auth';
import { namedLimiter } from '../../platform/http/rate-limit';
import { newId } from '../../platform/ids';
import type { Language } from '../../platform/http/language';
import { checkPassword, createUserAdmin } from './accounts.admin';
import { createApiKeyStore } from './accounts.api-keys';
import { createEmailAccounts } from './accounts.email';
import { createKeyCache } from './accounts.key-cache';
import { NO_ORGS, type OrgMembership } from './accounts.org-port';
import type { DbOrTx } from '../../platform/db';
import { createMailer } from './accounts.mailer';
import { createAccountNotifications } from './accounts.notifications';
import { dummyHash, hashPassword, needsRehash, verifyPassword } from './accounts.passwords';
import { loginChallenges, sessions, users } from './accounts.tables';
import { createTwoFactor } from './accounts.two-factor';

export interface UserView {
  id: string;
  email: string | null;
}

/** Who is asking, for rate limits and the session list. */
export interface RequestMeta {
  address: string | null;
  userAgent?: string | null;
  /** The language the request asked for (cookie, Accept-Language): a new account's mails are in it. */
  locale?: Language;
}

export type LoginResult =
  | { token: string; user: UserView }
  | { two_factor_required: true; challenge_token: string; expires_at: string };

const CHALLENGE_TTL_MS = 5 * 60_000;
const CHALLENGE_MAX_WRONG = 5;
const EMAIL = /^[^\s@]+@[^\s@]+$/;

const newSecretToken = () => randomBytes(32).toString('base64url');

/**
 * `+1 (555) 010-9999` → `+15550109999`; null when it is not a phone number. On the China site a
 * bare 11-digit mainland mobile number (what people type there) is +86, the spelling phone codes use.
 */
export function normalizePhone(raw: string, site?: 'intl' | 'cn'): string | null {
  const phone = raw.replace(/[\s().-]/g, '');
  if (!/^\+?\d{6,20}$/.test(phone)) return null;
  return site === 'cn' && /^1[3-9]\d{9}$/.test(phone) ? `+86${phone}` : phone;
}

/** The spellings an account made earlier may have stored a number under: as given, without its +, a mainland number without +86. */
export function phoneSpellings(phone: string): string[] {
  return [...new Set([phone, phone.replace(/^\+/, ''), ...(phone.startsWith('+86') ? [phone.slice(3)] : [])])];
}

/** One spelling per identifier, so reformatting an email or a phone number does not get a fresh bucket. */
function identifierKey(identifier: string): string {
  const id = identifier.trim().toLowerCase();
  return id.includes('@') ? id : (normalizePhone(id) ?? id);
}

function validateNewAccount(input: { email: string; password: string; phone?: string | null }, site: 'intl' | 'cn') {
  const email = input.email.trim();
  if (email.length > 128 || !EMAIL.test(email)) throw new AppError('invalid', 'email is not a valid address of at most 128 characters');
  if (input.password.length < 8 || input.password.length > 128) throw new AppError('invalid', 'password must be 8 to 128 characters');
  let phone: string | null = null;
  if (input.phone != null && input.phone !== '') {
    phone = normalizePhone(input.phone, site);
    if (!phone) throw new AppError('invalid', 'phone must be 6 to 20 digits, optionally with a leading +');
  }
  return { email, phone };
}

export function createAccountsService(ctx: AppContext) {
  const { db } = ctx.database;
  let orgs: OrgMembership = NO_ORGS;
  const keyCache = createKeyCache(ctx, () => orgs);
  const keys = createApiKeyStore(ctx, keyCache, () => orgs);
  const admin = createUserAdmin(ctx, keyCache);
  const twoFactor = createTwoFactor(ctx);
  const mailer = createMailer(ctx);
  const email = createEmailAccounts(ctx, mailer);
  const notifications = createAccountNotifications(ctx, email, mailer.enabled);
  const limits = { login: namedLimiter(ctx, 'login'), loginAddress: namedLimiter(ctx, 'login_address'), register: namedLimiter(ctx, 'register'), twofa: namedLimiter(ctx, 'twofa') };
  // Made soon after start-up, so even an early unknown identifier costs one hash like a wrong
  // password does; not during it: one argon2 hash is ~20 ms of CPU (docs/design/start-up.md).
  const dummyWarmUp = setTimeout(() => void dummyHash(), 1000);
  dummyWarmUp.unref?.();
  ctx.onShutdown(() => clearTimeout(dummyWarmUp));

  /** Takes a token from every bucket (so a blocked caller keeps paying) and refuses if any is empty. */
  function enforceAll(limiter: ReturnType<typeof namedLimiter>, bucketKeys: string[], message: string) {
    const wait = Math.max(...bucketKeys.map((k) => limiter.take(k)));
    if (wait > 0) throw new AppError('rate_limited', message, { 'retry-after': String(wait) });
  }

  async function createUser(input: {
    email: string;
    password: string;
    phone?: string | null;
    isAdmin?: boolean;
    locale?: Language | null;
    /** The operator vouches for the address (`cpd users create`). */
    emailVerified?: boolean;
  }): Promise<UserView> {
    const { email, phone } = validateNewAccount(input, ctx.config.site);
    const passwordHash = await hashPassword(input.password);
    const emailVerifiedAt = input.emailVerified ? ctx.clock.now() : null;
    const inserted = await db
      .insert(users)
      .values({ id: newId('usr'), email, phone, passwordHash, isAdmin: input.isAdmin ?? false, locale: input.locale ?? null, emailVerifiedAt })
      .onConflictDoNothing()
      .returning({ id: users.id, email: users.email });
    if (inserted.length === 0) throw new AppError('conflict', 'an account with this email or phone already exists');
    return inserted[0]!;
  }

  /** A new session for the user; `signIn` also records it as the account's last login. */
  async function createSession(userId: string, meta: { userAgent?: string | null; ip?: string | null; signIn?: boolean } = {}) {
    const token = newSecretToken();
    const now = ctx.clock.now();
    const row = {
      id: newId('ses'),
      userId,
      tokenHash: sha256Hex(token),
      createdAt: now,
      expiresAt: new Date(now.getTime() + ctx.config.sessionTtlMs),
      userAgent: meta.userAgent?.slice(0, 256) ?? null,
      ip: meta.ip ?? null,
    };
    // One statement, so one round trip and one commit: the account's expired sessions go as the
    // new one comes, and a sign-in is recorded with it (a commit of its own cost a WAL flush).
    const signIn = meta.signIn ? sql`, signed_in as (update ${users} set last_login_at = ${now.toISOString()}::timestamptz where ${users.id} = ${userId})` : sql``;
    await ctx.database.query(sql`
      with expired as (delete from ${sessions} where ${sessions.userId} = ${userId} and ${sessions.expiresAt} <= ${now.toISOString()}::timestamptz)${signIn}
      insert into ${sessions} (id, user_id, token_hash, created_at, expires_at, user_agent, ip)
      values (${row.id}, ${userId}, ${row.tokenHash}, ${now.toISOString()}::timestamptz, ${row.expiresAt.toISOString()}::timestamptz, ${row.userAgent}, ${row.ip})`);
    return { token, session: row };
  }

  async function signedIn(user: UserView, meta: RequestMeta) {
    const { token } = await createSession(user.id, { userAgent: meta.userAgent, ip: meta.address, signIn: true });
    return { token, user: { id: user.id, email: user.email } };
  }

  /**
   * A new account, signed in. With EMAIL_VERIFICATION=required the answer is `{pending: true}`
   * for a new and a taken address alike (no session: it would tell them apart); the owner of a
   * taken one is told by mail, a new one gets its link and signs in with its password.
   */
  async function register(input: { email: string; password: string; phone?: string | null }, meta: RequestMeta): Promise<{ token: string; user: UserView } | { pending: true }> {
    if (ctx.config.registration === 'closed') throw new AppError('forbidden', 'registration is closed on this site');
    enforceAll(limits.register, [`ip:${meta.address}`, `id:${identifierKey(input.email)}`], 'too many registrations; try again later');
    let user: UserView;
    try {
      user = await createUser({ ...input, locale: meta.locale });
    } catch (err) {
      if (email.hidesRegistrations && err instanceof AppError && err.kind === 'conflict' && (await email.registrationAttempt(input.email))) return { pending: true };
      throw err;
    }
    await email.registered({ ...user, locale: meta.locale ?? null });
    return email.hidesRegistrations ? { pending: true } : signedIn(user, meta);
  }

  async function findByIdentifier(identifier: string) {
    const id = identifier.trim();
    if (id.includes('@')) {
      const [row] = await db.select().from(users).where(sql`lower(${users.email}) = ${id.toLowerCase()}`).limit(1);
      return row ?? null;
    }
    const phone = normalizePhone(id, ctx.config.site);
    return phone ? findByPhone(phone) : null;
  }

  /**
   * The account of a number, under the spellings an older account may have stored it in (E.164,
   * without its +, a mainland number without +86); of two such accounts, the one spelled as asked.
   */
  async function findByPhone(phone: string) {
    const [row] = await db
      .select()
      .from(users)
      .where(inArray(users.phone, phoneSpellings(phone)))
      .orderBy(sql`${users.phone} = ${phone} desc`)
      .limit(1);
    return row ?? null;
  }

  /**
   * Password login. An unknown identifier is verified against a dummy hash, so it costs what a
   * wrong password costs and answers the same 401. Hashes with older parameters are upgraded.
   * Throttled per identifier+address and per address, counting failures only (a success gives its
   * tokens back): a stranger's failures never spend the buckets of the owner's own address, so
   * nobody can lock an account out by guessing at it.
   */
  async function login(input: { identifier: string; password: string }, meta: RequestMeta): Promise<LoginResult> {
    const pairKey = `id:${identifierKey(input.identifier)}|ip:${meta.address}`;
    const addressKey = `ip:${meta.address}`;
    const wait = Math.max(limits.login.take(pairKey), limits.loginAddress.take(addressKey));
    if (wait > 0) throw new AppError('rate_limited', 'too many failed logins; try again later', { 'retry-after': String(wait) });
    const user = await findByIdentifier(input.identifier);
    const ok = await verifyPassword(user?.passwordHash ?? (await dummyHash()), input.password);
    if (!user || !ok) throw new AppError('unauthorized', 'invalid identifier or password');
    limits.login.refund(pairKey);
    limits.loginAddress.refund(addressKey);
    if (user.disabled) throw new AppError('forbidden', 'this account is disabled');
    if (user.passwordHash && (await needsRehash(user.passwordHash))) {
      await db.update(users).set({ passwordHash: await hashPassword(input.password) }).where(eq(users.id, user.id));
    }
    return signInOrChallenge(user, meta);
  }

  /**
   * The last step of every sign-in that proved who the caller is (a password, a phone code, a
   * provider): a session, or the 2FA challenge when the account has 2FA, so no way in skips the
   * second factor.
   */
  async function signInOrChallenge(user: UserView & { totpSecret: string | null }, meta: RequestMeta): Promise<LoginResult> {
    if (!user.totpSecret) return signedIn(user, meta);
    return startChallenge(user.id);
  }

  /** The second factor's wait: the token the 2FA step presents with its code. */
  async function startChallenge(userId: string): Promise<LoginResult> {
    const challengeToken = newSecretToken();
    const now = ctx.clock.now();
    const expiresAt = new Date(now.getTime() + CHALLENGE_TTL_MS);
    await db.delete(loginChallenges).where(and(eq(loginChallenges.userId, userId), lte(loginChallenges.expiresAt, now)));
    await db.insert(loginChallenges).values({ id: newId('chl'), userId, tokenHash: sha256Hex(challengeToken), expiresAt });
    return { two_factor_required: true, challenge_token: challengeToken, expires_at: expiresAt.toISOString() };
  }

  /** A sign-in proven another way (a provider): a session, or the 2FA step when the account has 2FA on, as after a password. */
  async function signInProven(userId: string, meta: RequestMeta): Promise<LoginResult> {
    const [user] = await db.select().from(users).where(eq(users.id, userId)).limit(1);
    if (!user) throw new AppError('unauthorized', 'account not found');
    if (user.disabled) throw new AppError('forbidden', 'this account is disabled');
    return signInOrChallenge(user, meta);
  }

  /** Second step of a 2FA login: a live challenge and a TOTP or recovery code. The fifth wrong code ends the challenge. */
  async function verifyChallenge(input: { challenge_token: string; code: string }, meta: RequestMeta) {
    const tokenHash = sha256Hex(input.challenge_token);
    enforceAll(limits.twofa, [`ip:${meta.address}`, `challenge:${tokenHash}`], 'too many attempts; try again later');
    const live = and(eq(loginChallenges.tokenHash, tokenHash), gt(loginChallenges.expiresAt, ctx.clock.now()), sql`${loginChallenges.failedAttempts} < ${CHALLENGE_MAX_WRONG}`);
    const [challenge] = await db.select().from(loginChallenges).where(live).limit(1);
    if (!challenge) throw new AppError('unauthorized', 'the challenge is invalid or expired; sign in again');
    enforceAll(limits.twofa, [`user:${challenge.userId}`], 'too many attempts; try again later');
    if (!(await twoFactor.consumeCode(challenge.userId, input.code))) {
      const [after] = await db
        .update(loginChallenges)
        .set({ failedAttempts: sql`${loginChallenges.failedAttempts} + 1` })
        .where(eq(loginChallenges.id, challenge.id))
        .returning({ failedAttempts: loginChallenges.failedAttempts });
      if (after && after.failedAttempts >= CHALLENGE_MAX_WRONG) await db.delete(loginChallenges).where(eq(loginChallenges.id, challenge.id));
      throw new AppError('unauthorized', 'the code does not match');
    }
    // Deleting is the claim: of two concurrent right answers only one gets a session.
    const claimed = await db.delete(loginChallenges).where(and(eq(loginChallenges.id, challenge.id), live)).returning({ id: loginChallenges.id });
    if (claimed.length === 0) throw new AppError('unauthorized', 'the challenge is invalid or expired; sign in again');
    return signedIn((await getUser(challenge.userId))!, meta);
  }

  /** A 2FA code check for enable/disable, limited per account and address like the login step. */
  function limitTwoFactor(userId: string, meta: RequestMeta) {
    enforceAll(limits.twofa, [`ip:${meta.address}`, `user:${userId}`], 'too many attempts; try again later');
  }

  async function me(userId: string) {
    const [row] = await db.select().from(users).where(eq(users.id, userId)).limit(1);
    if (!row) throw new AppError('unauthorized', 'account not found');
    return {
      id: row.id,
      email: row.email,
      phone: row.phone,
      is_admin: row.isAdmin,
      has_password: row.passwordHash !== null,
      two_factor_enabled: row.totpSecret !== null,
      email_verified: row.emailVerifiedAt !== null,
      created_at: row.createdAt.toISOString(),
    };
  }

  async function listSessions(userId: string, currentSessionId: string | null) {
    const rows = await db
      .select()
      .from(sessions)
      .where(and(eq(sessions.userId, userId), gt(sessions.expiresAt, ctx.clock.now())))
      .orderBy(desc(sessions.createdAt), desc(sessions.id));
    return rows.map((r) => ({
      id: r.id,
      created_at: r.createdAt.toISOString(),
      expires_at: r.expiresAt.toISOString(),
      user_agent: r.userAgent,
      ip: r.ip,
      current: r.id === currentSessionId,
    }));
  }

  /** Ends one of the caller's sessions; sessions are never cached, so it takes effect at once everywhere. */
  async function deleteSession(userId: string, sessionId: string): Promise<void> {
    const deleted = await db
      .delete(sessions)
      .where(and(eq(sessions.id, sessionId), eq(sessions.userId, userId)))
      .returning({ id: sessions.id });
    if (deleted.length === 0) throw new AppError('not_found', 'session not found');
  }

  // Every session-authenticated request runs it: prepared, the join is parsed and planned once per
  // connection instead of at every request.
  const sessionCaller = db
    .select({ sessionId: sessions.id, userId: users.id, email: users.email, isAdmin: users.isAdmin })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(and(eq(sessions.tokenHash, sql.placeholder('tokenHash')), gt(sessions.expiresAt, sql.placeholder('now')), eq(users.disabled, false)))
    .limit(1)
    .prepare('session_caller');

  const resolver: CallerResolver = {
    async callerForSession(token) {
      const [row] = await sessionCaller.execute({ tokenHash: sha256Hex(token), now: ctx.clock.now().toISOString() });
      if (!row) return null;
      return { userId: row.userId, email: row.email, isAdmin: row.isAdmin, via: 'session', sessionId: row.sessionId, keyId: null } satisfies Caller;
    },
    callerForKey: keyCache.callerForKey,
  };

  /**
   * The caller changes its own password: the current one is checked like a login (argon2, the
   * login rate limit per account and address), and every other session of the account ends. An
   * account without a password (made by a provider sign-in) sets its first one without it.
   */
  async function changePassword(caller: { userId: string; sessionId: string | null }, input: { current_password?: string; new_password: string }, meta: RequestMeta) {
    const buckets = [`ip:${meta.address}`, `user:${caller.userId}`];
    enforceAll(limits.login, buckets, 'too many attempts; try again later');
    const [user] = await db.select().from(users).where(eq(users.id, caller.userId)).limit(1);
    if (!user) throw new AppError('unauthorized', 'account not found');
    if (user.passwordHash && !(await verifyPassword(user.passwordHash, input.current_password ?? ''))) throw new AppError('forbidden', 'the current password does not match');
    for (const k of buckets) limits.login.refund(k);
    checkPassword(input.new_password);
    const passwordHash = await hashPassword(input.new_password);
    await db.transaction(async (tx) => {
      await tx.update(users).set({ passwordHash }).where(eq(users.id, caller.userId));
      await tx.delete(sessions).where(and(eq(sessions.userId, caller.userId), caller.sessionId ? ne(sessions.id, caller.sessionId) : undefined));
    });
    await email.passwordChanged(caller.userId);
  }

  /** An account by id, email or phone (the shell's `--user`); throws not_found. */
  async function requireUserRef(ref: string) {
    const row = ref.startsWith('usr_') ? await admin.requireUser(ref).catch(() => null) : await findByIdentifier(ref);
    if (!row) throw new AppError('not_found', `no account "${ref}"`);
    return { id: row.id, email: row.email };
  }

  async function getUser(userId: string): Promise<UserView | null> {
    const [row] = await db.select({ id: users.id, email: users.email }).from(users).where(eq(users.id, userId)).limit(1);
    return row ?? null;
  }

  /** Emails by user id, for reports (router cost rows show the account's email; the phone of an account that has none). */
  async function emailsOf(userIds: string[]): Promise<Map<string, string>> {
    if (userIds.length === 0) return new Map();
    const rows = await db
      .select({ id: users.id, email: users.email, phone: users.phone })
      .from(users)
      .where(sql`${users.id} in ${userIds}`);
    return new Map(rows.map((r) => [r.id, r.email ?? r.phone ?? r.id]));
  }

  return {
    createUser,
    createSession,
    getUser,
    emailsOf,
    resolver,
    register,
    login,
    signInOrChallenge,
    signInProven,
    findByPhone,
    verifyChallenge,
    me,
    listSessions,
    deleteSession,
    changePassword,
    requireUserRef,
    listUsers: admin.listUsers,
    getUserDetail: admin.getUserDetail,
    updateUser: admin.updateUser,
    setPassword: admin.setPassword,
    async createApiKey(...args: Parameters<typeof keys.createApiKey>) {
      await email.requireVerified(args[0]);
      return keys.createApiKey(...args);
    },
    /** 403 "verify your email first" for an unverified account where EMAIL_VERIFICATION=required (payments). */
    requireVerifiedEmail: email.requireVerified,
    /** Verification and password-reset mails (accounts.email.ts). */
    email,
    /** Payment, refund and low-balance mails; `watch(billing)` once billing exists (accounts.notifications.ts). */
    notifications,
    listApiKeys: keys.listApiKeys,
    updateApiKey: keys.updateApiKey,
    /** The limits of an API key, for the router's admission (null: no such key). */
    keyLimitsOf: keyCache.limitsOf,
    /** Whether an API key's requests are captured (from the key cache; false for an unknown key). */
    keyCaptures: async (keyId: string) => (await keyCache.limitsOf(keyId))?.capture === true,
    revokeApiKey: keys.revokeApiKey,
    /** Wires organizations in (app.ts, once the orgs module exists): its keys' membership and caps. */
    useOrgs(membership: OrgMembership) {
      orgs = membership;
    },
    /** Outgoing mail (invitations); `enabled` false when no mail is configured. */
    mailer,
    /** Creators of keys by id. */
    keyCreatorsOf: keys.creatorsOf,
    /**
     * Runs `change` (which removes a member, in `tx`) and revokes the member's keys of the
     * organization with it; answers once every replica dropped them.
     */
    removeOrgMember: (orgId: string, userId: string, change: (tx: DbOrTx) => Promise<boolean>) =>
      keyCache.refreshMemberKeys(orgId, userId, async (tx) => {
        if (!(await change(tx))) return false;
        await keys.revokeOrgKeys(tx, orgId, userId);
        return true;
      }),
    /** Runs `change` (a member's role or cap) and makes every replica reload the member's keys before answering. */
    changeOrgMember: (orgId: string, userId: string, change: (tx: DbOrTx) => Promise<boolean>) => keyCache.refreshMemberKeys(orgId, userId, change),
    /** Runs `change` (which deletes an organization) and revokes all of its keys on every replica. */
    deleteOrgKeys: (orgId: string, change: (tx: DbOrTx) => Promise<boolean>) =>
      keyCache.refuseOrgKeys(orgId, async (tx) => {
        if (!(await change(tx))) return false;
        await keys.revokeOrgKeys(tx, orgId);
        return true;
      }),
    setupTwoFactor: twoFactor.setup,
    async enableTwoFactor(userId: string, code: string, meta: RequestMeta) {
      limitTwoFactor(userId, meta);
      return twoFactor.enable(userId, code);
    },
    async disableTwoFactor(userId: string, code: string, meta: RequestMeta) {
      limitTwoFactor(userId, meta);
      return twoFactor.disable(userId, code);
    },
  };
}

export type AccountsService = ReturnType<typeof createAccountsService>;

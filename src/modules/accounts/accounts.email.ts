/**
 * What an account does by mail: prove its address (EMAIL_VERIFICATION), reset a forgotten
 * password, and hear about changes to it. Links carry a random 256-bit token stored only as its
 * SHA-256 (account_tokens), used once: claiming it is one conditional UPDATE, so two clicks never
 * both succeed. Mails go out after the change committed (mailer.deliver never blocks a request).
 *
 * No answer here tells a stranger whether an address has an account: forgot-password is 202 for
 * any address, and with EMAIL_VERIFICATION=required registration is too (registerQuietly). The
 * throttles count the address asked about whether or not it has an account.
 */
import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { randomBytes, sha256Hex } from '../../platform/crypto';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import type { Language } from '../../platform/http/language';
import { newId } from '../../platform/ids';
import { type MailContent, renderMail } from './accounts.mail-messages';
import type { Mailer } from './accounts.mailer';
import { hashPassword } from './accounts.passwords';
import { createSendThrottle, type SendLimit } from './accounts.send-throttle';
import { accountTokens, loginChallenges, sessions, users } from './accounts.tables';

const VERIFY_TTL_MS = 24 * 3600_000;
const RESET_TTL_MS = 30 * 60_000;
const HOUR = 3600_000;

/** Who asked, for the per-address throttles. */
interface Asker {
  address: string | null;
}

type Purpose = 'verify_email' | 'reset_password';
/** An account to mail; one made by a phone code may have no address, and is then not mailed. */
type Recipient = { id: string; email: string | null; locale: string | null };

export function createEmailAccounts(ctx: AppContext, mailer: Mailer) {
  const { db } = ctx.database;
  const { config } = ctx;
  const throttle = createSendThrottle(ctx);
  // The site's name as GET /api/site shows it.
  const siteName = config.site === 'cn' ? 'cpd China' : 'cpd International';
  const link = (path: string, token?: string) => `${config.publicUrl.replace(/\/$/, '')}${path}${token ? `?token=${encodeURIComponent(token)}` : ''}`;
  const verificationOn = mailer.enabled && config.accounts.emailVerification !== 'off';

  /** The account's language, else the site's (Chinese on the China site). */
  const localeOf = (user: { locale: string | null }): Language => (user.locale === 'zh-CN' || user.locale === 'en' ? user.locale : config.site === 'cn' ? 'zh-CN' : 'en');

  function mail(user: Recipient, content: MailContent) {
    if (!user.email) return;
    const rendered = renderMail(content, localeOf(user), siteName);
    mailer.deliver({ ...rendered, to: user.email, kind: content.kind, userId: user.id });
  }

  async function recipient(userId: string): Promise<(Recipient & { emailVerifiedAt: Date | null; disabled: boolean }) | null> {
    const [row] = await db
      .select({ id: users.id, email: users.email, locale: users.locale, emailVerifiedAt: users.emailVerifiedAt, disabled: users.disabled })
      .from(users)
      .where(eq(users.id, userId))
      .limit(1);
    return row ?? null;
  }

  async function issueToken(on: DbOrTx, user: { id: string; email: string }, purpose: Purpose, ttlMs: number): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    const now = ctx.clock.now();
    await on.insert(accountTokens).values({
      id: newId('atk'),
      userId: user.id,
      purpose,
      tokenHash: sha256Hex(token),
      email: user.email,
      createdAt: now,
      expiresAt: new Date(now.getTime() + ttlMs),
    });
    // Spent and expired links of the account go as new ones come.
    await on.delete(accountTokens).where(and(eq(accountTokens.userId, user.id), sql`(${accountTokens.usedAt} is not null or ${accountTokens.expiresAt} <= ${now.toISOString()}::timestamptz)`));
    return token;
  }

  /** Marks the token used if it is live and for `purpose`; answers its account and address, or null. */
  async function claim(on: DbOrTx, token: string, purpose: Purpose) {
    const now = ctx.clock.now();
    const [row] = await on
      .update(accountTokens)
      .set({ usedAt: now })
      .where(and(eq(accountTokens.tokenHash, sha256Hex(token)), eq(accountTokens.purpose, purpose), isNull(accountTokens.usedAt), gt(accountTokens.expiresAt, now)))
      .returning({ userId: accountTokens.userId, email: accountTokens.email });
    return row ?? null;
  }

  /** Reserves a send or throws 429 (counted whether or not the address has an account). */
  const reserve = (kind: string, limits: SendLimit[]) => throttle.reserve(kind, limits, 'too many mails requested; try again later');
  /** The same, for mails sent as a side effect: over the limit, the mail is skipped and the request goes on. */
  async function reserveQuietly(kind: string, limits: SendLimit[]): Promise<boolean> {
    try {
      await reserve(kind, limits);
      return true;
    } catch (err) {
      if (err instanceof AppError && err.kind === 'rate_limited') return false;
      throw err;
    }
  }
  const perEmail = (email: string, max: number): SendLimit => ({ subject: `email:${email.trim().toLowerCase()}`, max, windowMs: HOUR });
  const perAddress = (asker: Asker, max: number): SendLimit => ({ subject: `ip:${asker.address ?? 'unknown'}`, max, windowMs: HOUR });

  async function mailVerification(user: Recipient) {
    if (!user.email) return;
    const token = await issueToken(db, { id: user.id, email: user.email }, 'verify_email', VERIFY_TTL_MS);
    mail(user, { kind: 'verify_email', link: link('/verify-email', token) });
  }

  /** A mail that follows a committed change: its failure is logged, never the change's answer. */
  async function quietly(kind: string, userId: string, send: () => Promise<void>) {
    try {
      await send();
    } catch (err) {
      ctx.log.warn({ err, mail: { kind, user_id: userId } }, 'mail not sent');
    }
  }

  /** Tells the owner the password changed (after a reset or a change in the console). */
  const passwordChanged = (userId: string) =>
    quietly('password_changed', userId, async () => {
      if (!mailer.enabled) return;
      const user = await recipient(userId);
      if (user) mail(user, { kind: 'password_changed', link: link('/forgot-password') });
    });

  return {
    /**
     * An organization's invitation to `to` (who may have no account yet), in the language of the
     * account of that address when there is one, else the site's. False when it is not sent by
     * SMTP (no mail, or the log transport of a developer's machine): the inviter then passes the link on.
     */
    async orgInvite(to: string, invite: { org: string; inviter: string; role: string; link: string }): Promise<boolean> {
      if (!mailer.enabled) return false;
      const smtp = config.accounts.mail?.kind === 'smtp';
      const [user] = await db.select({ id: users.id, locale: users.locale }).from(users).where(sql`lower(${users.email}) = ${to.toLowerCase()}`).limit(1);
      mail({ id: user?.id ?? '', email: to, locale: user?.locale ?? null }, { kind: 'org_invite', ...invite });
      return smtp;
    },

    /** With EMAIL_VERIFICATION=required, registration must not tell new addresses from taken ones. */
    hidesRegistrations: verificationOn && config.accounts.emailVerification === 'required',

    /** After a registration: the verification mail (skipped over the per-address limit; registration has its own). */
    async registered(user: Recipient) {
      if (!verificationOn || !user.email) return;
      const address = user.email;
      await quietly('verify_email', user.id, async () => {
        if (await reserveQuietly('verify_email', [perEmail(address, 5)])) await mailVerification(user);
      });
    },

    /** Someone tried to register an address that has an account: its owner hears of it (a few times an hour at most). */
    async registrationAttempt(email: string) {
      const [user] = await db
        .select({ id: users.id, email: users.email, locale: users.locale })
        .from(users)
        .where(sql`lower(${users.email}) = ${email.trim().toLowerCase()}`)
        .limit(1);
      if (!user) return false;
      await quietly('registration_attempt', user.id, async () => {
        if (await reserveQuietly('registration_attempt', [perEmail(email, 3)])) mail(user, { kind: 'registration_attempt', link: link('/login') });
      });
      return true;
    },

    /** POST /api/auth/email/verify/send: a new link to the caller's address. */
    async sendVerification(userId: string, asker: Asker) {
      if (!verificationOn) throw new AppError('not_found', 'email verification is off on this site');
      const user = await recipient(userId);
      if (!user) throw new AppError('unauthorized', 'account not found');
      if (user.emailVerifiedAt) throw new AppError('conflict', 'your email is already verified');
      if (!user.email) throw new AppError('conflict', 'your account has no email address');
      await reserve('verify_email', [perEmail(user.email, 5), perAddress(asker, 20)]);
      await mailVerification(user);
    },

    /** POST /api/auth/email/verify: the link proves the address it was sent to, if that is still the account's. */
    async verify(token: string) {
      const done = await db.transaction(async (tx) => {
        const claimed = await claim(tx, token, 'verify_email');
        if (!claimed) return null;
        const [user] = await tx
          .update(users)
          .set({ emailVerifiedAt: sql`coalesce(${users.emailVerifiedAt}, ${ctx.clock.now().toISOString()}::timestamptz)` })
          .where(and(eq(users.id, claimed.userId), sql`lower(${users.email}) = lower(${claimed.email})`))
          .returning({ id: users.id });
        return user ? { email: claimed.email } : null;
      });
      if (!done) throw new AppError('invalid', 'this link is invalid, used or expired; ask for a new one');
      return { email: done.email, email_verified: true as const };
    },

    /**
     * POST /api/auth/password/forgot: a reset link when the address has an (enabled) account;
     * nothing otherwise, and the same answer either way.
     */
    async forgot(email: string, asker: Asker) {
      if (!mailer.enabled) throw new AppError('not_found', 'password reset by mail is not available on this site');
      await reserve('forgot_password', [perEmail(email, 5), perAddress(asker, 20)]);
      // After the answer: how long it takes must not tell whether the address has an account.
      mailer.later('reset_password', async () => {
        const [user] = await db
          .select({ id: users.id, email: users.email, locale: users.locale, disabled: users.disabled })
          .from(users)
          .where(sql`lower(${users.email}) = ${email.trim().toLowerCase()}`)
          .limit(1);
        if (!user?.email || user.disabled) return;
        const token = await issueToken(db, { id: user.id, email: user.email }, 'reset_password', RESET_TTL_MS);
        mail(user, { kind: 'reset_password', link: link('/reset-password', token) });
      });
    },

    /**
     * POST /api/auth/password/reset: a live link sets the password, ends every session and pending
     * 2FA login of the account and spends its other reset links; the link also proves the address.
     */
    async reset(token: string, password: string) {
      // A cheap look first: a wrong token costs no password hash (this endpoint needs no credential).
      const now = ctx.clock.now();
      const [live] = await db
        .select({ id: accountTokens.id })
        .from(accountTokens)
        .where(and(eq(accountTokens.tokenHash, sha256Hex(token)), eq(accountTokens.purpose, 'reset_password'), isNull(accountTokens.usedAt), gt(accountTokens.expiresAt, now)))
        .limit(1);
      if (!live) throw new AppError('invalid', 'this link is invalid, used or expired; ask for a new one');
      const passwordHash = await hashPassword(password);
      const userId = await db.transaction(async (tx) => {
        const claimed = await claim(tx, token, 'reset_password');
        if (!claimed) return null;
        const at = now.toISOString();
        await tx
          .update(users)
          .set({
            passwordHash,
            emailVerifiedAt: sql`case when lower(${users.email}) = lower(${claimed.email}) then coalesce(${users.emailVerifiedAt}, ${at}::timestamptz) else ${users.emailVerifiedAt} end`,
          })
          .where(eq(users.id, claimed.userId));
        await tx.delete(sessions).where(eq(sessions.userId, claimed.userId));
        await tx.delete(loginChallenges).where(eq(loginChallenges.userId, claimed.userId));
        await tx
          .update(accountTokens)
          .set({ usedAt: now })
          .where(and(eq(accountTokens.userId, claimed.userId), eq(accountTokens.purpose, 'reset_password'), isNull(accountTokens.usedAt)));
        return claimed.userId;
      });
      if (!userId) throw new AppError('invalid', 'this link is invalid, used or expired; ask for a new one');
      await passwordChanged(userId);
    },

    passwordChanged,

    /** 403 for an unverified account where EMAIL_VERIFICATION=required (API keys, payments). */
    async requireVerified(userId: string) {
      if (!verificationOn || config.accounts.emailVerification !== 'required') return;
      const user = await recipient(userId);
      if (user && !user.emailVerifiedAt) throw new AppError('forbidden', 'verify your email first');
    },

    localeOf,
    mail,
    link,
  };
}

export type EmailAccounts = ReturnType<typeof createEmailAccounts>;

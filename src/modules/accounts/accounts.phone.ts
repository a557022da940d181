/**
 * Sign-up, sign-in and password reset by a code sent by SMS (docs/accounts/phone.md).
 *
 * A code is 6 digits from the CSPRNG, stored as HMAC-SHA256 under SECRET_KEY over purpose, phone
 * and code: a million codes are quick to try against a plain hash, not against a keyed one without
 * the key. It lives 5 minutes and allows 5 tries; a new code for the same phone and purpose replaces
 * the older one; using it is a conditional UPDATE, so of two right answers at once one wins.
 *
 * Sending is throttled exactly across replicas (send_log): 1 a minute and 10 a day per phone, 20 an
 * hour per client address, counted the same whether or not a message goes out, so neither the
 * answer nor the throttle tells a stranger whether a number has an account.
 */
import { and, eq, gt, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { hmacHex, nodeCrypto, safeEqual } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { namedLimiter } from '../../platform/http/rate-limit';
import { newId } from '../../platform/ids';
import { checkPassword } from './accounts.admin';
import { hashPassword } from './accounts.passwords';
import { createSendThrottle } from './accounts.send-throttle';
import type { AccountsService, LoginResult, RequestMeta } from './accounts.service';
import { normalizePhone } from './accounts.service';
import { phoneCodes, sessions, users } from './accounts.tables';
import { createSmsSender, SmsError } from './sms';

export const PHONE_PURPOSES = ['login', 'register', 'reset'] as const;
export type PhonePurpose = (typeof PHONE_PURPOSES)[number];

const CODE_TTL_MS = 5 * 60_000;
const CODE_TRIES = 5;
const MINUTE = 60_000;
const SEND_LIMITS = { perPhoneMinute: 1, perPhoneDay: 10, perAddressHour: 20 };

/**
 * The one spelling of a number the phone codes use: E.164. On the China site a bare 11-digit
 * mainland mobile number (what people type there) is +86; anything else must carry its country code.
 */
export function phoneKey(raw: string, site: 'intl' | 'cn'): string {
  const phone = normalizePhone(raw, site);
  if (phone?.startsWith('+')) return phone;
  throw new AppError('invalid', 'phone must be a number with its country code, like +8613800000000');
}

export function createPhoneCodes(ctx: AppContext, accounts: Pick<AccountsService, 'signInOrChallenge' | 'findByPhone'>) {
  const { db } = ctx.database;
  const sender = createSmsSender(ctx);
  const throttle = createSendThrottle(ctx);
  // Wrong codes per phone+address and per address, like password logins: only
  // failures count, so a stranger's guesses never hold back the owner's own address.
  const limits = { pair: namedLimiter(ctx, 'login'), address: namedLimiter(ctx, 'login_address') };

  const codeHash = (purpose: PhonePurpose, phone: string, code: string) =>
    hmacHex(ctx.config.secretKey(), `cpd phone code\n${purpose}\n${phone}\n${code}`);

  function requireSms() {
    if (!sender) throw new AppError('not_found', 'phone codes are not enabled on this site');
    return sender;
  }


  /**
   * Sends a code when it can be used: register always (using it signs the owner in when the number
   * already has an account, so the answer reveals nothing), login and reset only for an enabled
   * account. The answer is the same 202 either way; provider failures are 502/503 and leave no code.
   */
  async function requestCode(input: { phone: string; purpose: PhonePurpose }, meta: RequestMeta): Promise<void> {
    const sms = requireSms();
    const phone = phoneKey(input.phone, ctx.config.site);
    if (input.purpose === 'register' && ctx.config.registration === 'closed')
      throw new AppError('forbidden', 'registration is closed on this site');
    await throttle.reserve(
      'sms',
      [
        { subject: `phone:${phone}`, max: SEND_LIMITS.perPhoneMinute, windowMs: MINUTE },
        { subject: `phone:${phone}`, max: SEND_LIMITS.perPhoneDay, windowMs: 24 * 60 * MINUTE },
        ...(meta.address ? [{ subject: `ip:${meta.address}`, max: SEND_LIMITS.perAddressHour, windowMs: 60 * MINUTE }] : []),
      ],
      'too many codes requested; try again later',
    );
    if (input.purpose !== 'register') {
      const user = await accounts.findByPhone(phone);
      if (!user || user.disabled) return;
    }

    const code = nodeCrypto().randomInt(0, 1_000_000).toString().padStart(6, '0');
    const now = ctx.clock.now();
    const id = newId('phc');
    await db.transaction(async (tx) => {
      // The new code replaces the older one of this purpose; this phone's dead codes go too.
      await tx
        .delete(phoneCodes)
        .where(and(eq(phoneCodes.phone, phone), or(eq(phoneCodes.purpose, input.purpose), lt(phoneCodes.expiresAt, now))));
      await tx.insert(phoneCodes).values({
        id,
        phone,
        purpose: input.purpose,
        codeHash: codeHash(input.purpose, phone, code),
        createdAt: now,
        expiresAt: new Date(now.getTime() + CODE_TTL_MS),
      });
    });
    try {
      await sms.send(phone, code);
    } catch (err) {
      // A code the owner never received must not stay usable.
      await db.delete(phoneCodes).where(eq(phoneCodes.id, id));
      const message = err instanceof SmsError ? err.message : 'unexpected error';
      ctx.log.error(
        { sms_provider: ctx.config.accounts.sms?.provider, reason: err instanceof SmsError ? err.reason : 'error', error: message },
        'SMS code not sent',
      );
      if (err instanceof SmsError && err.reason === 'unreachable')
        throw new AppError('unavailable', 'the SMS provider cannot be reached; try again later');
      throw new AppError('upstream', 'the SMS provider did not send the code; try again later');
    }
  }

  /**
   * Uses a live code of one of `purposes` for `phone`: every try is counted before the code is
   * compared (so at most 5 comparisons per code, however many arrive at once), and the match is
   * claimed by setting used_at where it is still null. Returns the purpose used, or throws 401.
   */
  async function useCode(phone: string, purposes: PhonePurpose[], code: string, meta: RequestMeta): Promise<PhonePurpose> {
    const pairKey = `phone:${phone}|ip:${meta.address}`;
    const addressKey = `ip:${meta.address}`;
    const wait = Math.max(limits.pair.take(pairKey), limits.address.take(addressKey));
    if (wait > 0) throw new AppError('rate_limited', 'too many wrong codes; try again later', { 'retry-after': String(wait) });
    const now = ctx.clock.now();
    // failed_attempts counts tries: the right one too, which is then used and dead anyway.
    const tried = await db
      .update(phoneCodes)
      .set({ failedAttempts: sql`${phoneCodes.failedAttempts} + 1` })
      .where(
        and(
          eq(phoneCodes.phone, phone),
          inArray(phoneCodes.purpose, purposes),
          isNull(phoneCodes.usedAt),
          gt(phoneCodes.expiresAt, now),
          sql`${phoneCodes.failedAttempts} < ${CODE_TRIES}`,
        ),
      )
      .returning({ id: phoneCodes.id, purpose: phoneCodes.purpose, codeHash: phoneCodes.codeHash });
    const candidate = /^\d{6}$/.test(code) ? code : '';
    for (const row of tried) {
      const purpose = row.purpose as PhonePurpose;
      if (!safeEqual(codeHash(purpose, phone, candidate), row.codeHash)) continue;
      const claimed = await db
        .update(phoneCodes)
        .set({ usedAt: now })
        .where(and(eq(phoneCodes.id, row.id), isNull(phoneCodes.usedAt)))
        .returning({ id: phoneCodes.id });
      if (claimed.length === 0) break;
      limits.pair.refund(pairKey);
      limits.address.refund(addressKey);
      return purpose;
    }
    throw new AppError('unauthorized', 'the code is wrong or has expired; request a new one');
  }

  /**
   * Signs in with a login or register code. A register code for a number without an account makes
   * a phone-only account (no email, no password; `created` is then true); for a number that has
   * one, it signs that account in like a login code. 2FA accounts get the password login's challenge.
   */
  async function loginWithCode(
    input: { phone: string; code: string },
    meta: RequestMeta,
  ): Promise<{ result: LoginResult; created: boolean }> {
    requireSms();
    const phone = phoneKey(input.phone, ctx.config.site);
    const purpose = await useCode(phone, ['login', 'register'], input.code.trim(), meta);
    let user = await accounts.findByPhone(phone);
    let created = false;
    if (!user && purpose === 'register') {
      if (ctx.config.registration === 'closed') throw new AppError('forbidden', 'registration is closed on this site');
      const [inserted] = await db
        .insert(users)
        .values({ id: newId('usr'), phone })
        .onConflictDoNothing()
        .returning();
      created = inserted !== undefined;
      // Lost a race with another registration of the same number: that account is the one.
      user = inserted ?? (await accounts.findByPhone(phone));
    }
    if (!user) throw new AppError('unauthorized', 'the code is wrong or has expired; request a new one');
    if (user.disabled) throw new AppError('forbidden', 'this account is disabled');
    return { result: await accounts.signInOrChallenge(user, meta), created };
  }

  /** Sets a new password with a reset code and ends every session of the account (like the mailed reset link). */
  async function resetWithCode(input: { phone: string; code: string; password: string }, meta: RequestMeta): Promise<void> {
    requireSms();
    const phone = phoneKey(input.phone, ctx.config.site);
    checkPassword(input.password);
    await useCode(phone, ['reset'], input.code.trim(), meta);
    const user = await accounts.findByPhone(phone);
    if (!user) throw new AppError('unauthorized', 'the code is wrong or has expired; request a new one');
    if (user.disabled) throw new AppError('forbidden', 'this account is disabled');
    const passwordHash = await hashPassword(input.password);
    await db.transaction(async (tx) => {
      await tx.update(users).set({ passwordHash }).where(eq(users.id, user.id));
      await tx.delete(sessions).where(eq(sessions.userId, user.id));
    });
  }

  return { requestCode, loginWithCode, resetWithCode };
}

export type PhoneCodes = ReturnType<typeof createPhoneCodes>;

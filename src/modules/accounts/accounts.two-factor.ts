/**
 * Second factor: TOTP per RFC 6238 through otplib (SHA-1, 6 digits, 30 s: what every
 * authenticator app speaks), plus ten one-time recovery codes stored as SHA-256.
 * A code is accepted one step either side of now (clock drift) and never twice: the accepted
 * time step is recorded and later codes must be newer.
 */
import { and, eq, isNull, lt, or } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { randomBytes, sha256Hex } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { recoveryCodes, users } from './accounts.tables';

const RECOVERY_CODE_COUNT = 10;
/** otplib is imported at first use: it is off the start-up path (docs/design/start-up.md). */
let otplib: Promise<typeof import('otplib') & { totp: import('otplib').TOTP }> | null = null;
const loadOtplib = () =>
  (otplib ??= import('otplib').then((m) => ({
    ...m,
    totp: new m.TOTP({ crypto: new m.NobleCryptoPlugin(), base32: new m.ScureBase32Plugin() }),
  })));
const TOTP_CODE = /^\d{6}$/;

/** `a1b2c-d3e4f`: 40 random bits each, one-time and rate limited. */
const newRecoveryCode = () => randomBytes(5).toString('hex').replace(/^(.{5})/, '$1-');
const recoveryHash = (code: string) => sha256Hex(code.toLowerCase().replace(/[\s-]/g, ''));

export function createTwoFactor(ctx: AppContext) {
  const { db } = ctx.database;
  const epochNow = () => Math.floor(ctx.clock.now().getTime() / 1000);

  /** The time step `code` matches for `secret`, newer than `afterStep`; null otherwise. */
  async function totpStep(secret: string, code: string, afterStep: number | null): Promise<number | null> {
    if (!TOTP_CODE.test(code)) return null;
    const { totp } = await loadOtplib();
    const result = await totp.verify(code, { secret, epoch: epochNow(), epochTolerance: 30, ...(afterStep === null ? {} : { afterTimeStep: afterStep }) });
    return result.valid ? result.timeStep : null;
  }

  async function userRow(userId: string) {
    const [row] = await db.select().from(users).where(eq(users.id, userId)).limit(1);
    if (!row) throw new AppError('unauthorized', 'account not found');
    return row;
  }

  /**
   * Checks a TOTP code or a recovery code for an account with 2FA enabled and consumes it
   * (records the TOTP step, or marks the recovery code used). Concurrent use of the same code
   * succeeds once: both writes are conditional.
   */
  async function consumeCode(userId: string, code: string): Promise<boolean> {
    const user = await userRow(userId);
    if (!user.totpSecret) return false;
    const step = await totpStep(user.totpSecret, code.trim(), user.totpLastStep);
    if (step !== null) {
      const updated = await db
        .update(users)
        .set({ totpLastStep: step })
        .where(and(eq(users.id, userId), or(isNull(users.totpLastStep), lt(users.totpLastStep, step))))
        .returning({ id: users.id });
      return updated.length > 0;
    }
    const used = await db
      .update(recoveryCodes)
      .set({ usedAt: ctx.clock.now() })
      .where(and(eq(recoveryCodes.userId, userId), eq(recoveryCodes.codeHash, recoveryHash(code)), isNull(recoveryCodes.usedAt)))
      .returning({ id: recoveryCodes.id });
    return used.length > 0;
  }

  async function isEnabled(userId: string): Promise<boolean> {
    return (await userRow(userId)).totpSecret !== null;
  }

  /** Starts enrolment: a fresh secret waits for its first code. Calling it again replaces it. */
  async function setup(userId: string): Promise<{ secret: string; otpauth_url: string }> {
    const user = await userRow(userId);
    if (user.totpSecret) throw new AppError('conflict', 'two-factor authentication is already enabled');
    const { generateSecret, generateURI } = await loadOtplib();
    const secret = generateSecret();
    await db.update(users).set({ totpPendingSecret: secret }).where(eq(users.id, userId));
    const issuer = `cpd ${new URL(ctx.config.publicUrl).host}`;
    return { secret, otpauth_url: generateURI({ issuer, label: user.email ?? user.phone ?? user.id, secret }) };
  }

  /** Completes enrolment with a code from the pending secret; answers the recovery codes, once. */
  async function enable(userId: string, code: string): Promise<{ enabled: true; recovery_codes: string[] }> {
    const user = await userRow(userId);
    if (user.totpSecret) throw new AppError('conflict', 'two-factor authentication is already enabled');
    if (!user.totpPendingSecret) throw new AppError('conflict', 'call POST /api/auth/2fa/setup first');
    const step = await totpStep(user.totpPendingSecret, code.trim(), null);
    if (step === null) throw new AppError('invalid', 'the code does not match');
    const codes = Array.from({ length: RECOVERY_CODE_COUNT }, newRecoveryCode);
    await db.transaction(async (tx) => {
      await tx
        .update(users)
        .set({ totpSecret: user.totpPendingSecret, totpPendingSecret: null, totpLastStep: step })
        .where(eq(users.id, userId));
      await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, userId));
      await tx.insert(recoveryCodes).values(codes.map((c) => ({ id: newId('rec'), userId, codeHash: recoveryHash(c) })));
    });
    return { enabled: true, recovery_codes: codes };
  }

  /** Turns 2FA off with a current TOTP code or an unused recovery code. */
  async function disable(userId: string, code: string): Promise<void> {
    if (!(await isEnabled(userId))) throw new AppError('conflict', 'two-factor authentication is not enabled');
    if (!(await consumeCode(userId, code))) throw new AppError('invalid', 'the code does not match');
    await db.transaction(async (tx) => {
      await tx.update(users).set({ totpSecret: null, totpPendingSecret: null, totpLastStep: null }).where(eq(users.id, userId));
      await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, userId));
    });
  }

  return { setup, enable, disable, consumeCode, isEnabled };
}

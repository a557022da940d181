/**
 * Redemption codes: prepaid amounts an operator creates in batches (to be sold by a shop) and a
 * user redeems into one `topup` of the wallet. A code is shown once, when its batch is created:
 * only its SHA-256 is stored, with a short prefix that names it in lists and in the top-up's
 * description. Redeeming marks the code (`redeemed_by is null` in the UPDATE's condition: of any
 * number of attempts on any number of replicas exactly one finds it unredeemed) and credits the
 * wallet in the same transaction, so a code credits once, ever.
 *
 * Every refusal is the same 400 "invalid code", whatever the reason (unknown, redeemed, disabled,
 * expired), so guesses learn nothing. Failures are counted per user in redemption_failures under
 * an advisory lock on the user, as the accounts module's send throttle does: 10 in an hour, then
 * 429, exact across replicas.
 */
import { createHash, randomBytes } from 'node:crypto';
import { and, desc, eq, gt, isNull, lt, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { exactMajorToMicros, toMajor } from '../../platform/money';
import { redemptionCodes, redemptionFailures } from './billing.tables';
import { type Ledger, transactionView } from './ledger';

/** Failed redemptions a user may make in FAILURE_WINDOW_MS before 429. */
export const MAX_FAILURES = 10;
const FAILURE_WINDOW_MS = 3600_000;
/** Largest amount of one code, in major units. */
const MAX_CODE_AMOUNT = 1_000_000;
/** Crockford's base 32: no I, L, O or U to misread. */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/** Five groups of four characters: 100 random bits. */
const GROUPS = 5;

export interface CodeBatchInput {
  count: number;
  amount: number;
  expires_at?: string | null;
  note?: string | null;
}

export type CodeStatus = 'unused' | 'redeemed' | 'disabled' | 'expired';

/** A new code, e.g. `7K3Q-M9XA-0TRE-PZ4N-B8HC`. */
function newCode(): string {
  const bytes = randomBytes(GROUPS * 4);
  const chars = [...bytes].map((b) => ALPHABET[b & 31]);
  return Array.from({ length: GROUPS }, (_, g) => chars.slice(g * 4, g * 4 + 4).join('')).join('-');
}

/** What a user typed, as it was generated: upper case, no spaces or dashes, then grouped again. */
function normalized(typed: string): string {
  const plain = typed.toUpperCase().replace(/[\s-]/g, '');
  return plain.match(/.{1,4}/g)?.join('-') ?? '';
}

const hashOf = (code: string) => createHash('sha256').update(code).digest('hex');
const prefixOf = (code: string) => code.slice(0, 4);

type CodeRow = typeof redemptionCodes.$inferSelect;

export function createRedemption(ctx: AppContext, ledger: Ledger) {
  const { db } = ctx.database;
  const currency = ctx.config.currency;

  const statusOf = (r: CodeRow, now: Date): CodeStatus =>
    r.redeemedBy ? 'redeemed' : r.disabledAt ? 'disabled' : r.expiresAt && r.expiresAt <= now ? 'expired' : 'unused';

  const view = (r: CodeRow, now: Date) => ({
    batch_id: r.batchId,
    prefix: r.prefix,
    amount: toMajor(r.amountMicros),
    currency: r.currency,
    status: statusOf(r, now),
    redeemed_by: r.redeemedBy,
    redeemed_at: r.redeemedAt?.toISOString() ?? null,
    expires_at: r.expiresAt?.toISOString() ?? null,
    note: r.note,
    created_at: r.createdAt.toISOString(),
  });

  /** Creates `count` codes; the only time the codes themselves are seen. */
  async function createBatch(input: CodeBatchInput) {
    const micros = exactMajorToMicros(input.amount);
    if (micros === null || micros <= 0n || input.amount > MAX_CODE_AMOUNT)
      throw new AppError('invalid', `amount must be above 0 and at most ${MAX_CODE_AMOUNT}, with at most 6 decimals`);
    const now = ctx.clock.now();
    let expiresAt: Date | null = null;
    if (input.expires_at != null) {
      expiresAt = new Date(input.expires_at);
      if (Number.isNaN(expiresAt.getTime()) || !/^\d{4}-\d\d-\d\dT/.test(input.expires_at)) throw new AppError('invalid', 'expires_at must be an ISO 8601 date-time');
      if (expiresAt <= now) throw new AppError('invalid', 'expires_at must be in the future');
    }
    const batchId = newId('cdb');
    const codes = Array.from({ length: input.count }, newCode);
    await db.insert(redemptionCodes).values(
      codes.map((code) => ({
        id: newId('cod'),
        batchId,
        prefix: prefixOf(code),
        codeHash: hashOf(code),
        amountMicros: micros,
        currency,
        note: input.note ?? null,
        expiresAt,
        createdAt: now,
      })),
    );
    return { batch_id: batchId, amount: toMajor(micros), currency, expires_at: expiresAt?.toISOString() ?? null, codes };
  }

  async function list(batchId?: string, limit = 1000) {
    const now = ctx.clock.now();
    const rows = await db
      .select()
      .from(redemptionCodes)
      .where(batchId ? eq(redemptionCodes.batchId, batchId) : undefined)
      .orderBy(desc(redemptionCodes.createdAt), redemptionCodes.id)
      .limit(limit);
    return { codes: rows.map((r) => view(r, now)) };
  }

  /** Disables the batch's unused codes (redeemed ones stay redeemed); 404 for an unknown batch. */
  async function disableBatch(batchId: string) {
    const [known] = await db.select({ id: redemptionCodes.id }).from(redemptionCodes).where(eq(redemptionCodes.batchId, batchId)).limit(1);
    if (!known) throw new AppError('not_found', 'no such batch');
    const disabled = await db
      .update(redemptionCodes)
      .set({ disabledAt: ctx.clock.now() })
      .where(and(eq(redemptionCodes.batchId, batchId), isNull(redemptionCodes.redeemedBy), isNull(redemptionCodes.disabledAt)))
      .returning({ id: redemptionCodes.id });
    return { batch_id: batchId, disabled: disabled.length };
  }

  /**
   * Redeems `typed` for `userId`: 200 {transaction}, or the one 400 for every refusal, or 429 after
   * MAX_FAILURES failures in the hour. The user's attempts are serialized by the advisory lock, so
   * the count of failures is exact across replicas.
   */
  async function redeem(userId: string, typed: string) {
    const now = ctx.clock.now();
    const code = normalized(typed);
    const outcome = await db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`redeem:${userId}`}, 0))`);
      const since = new Date(now.getTime() - FAILURE_WINDOW_MS);
      const failures = await tx
        .select({ createdAt: redemptionFailures.createdAt })
        .from(redemptionFailures)
        .where(and(eq(redemptionFailures.userId, userId), gt(redemptionFailures.createdAt, since)))
        .orderBy(redemptionFailures.createdAt)
        .limit(MAX_FAILURES);
      if (failures.length >= MAX_FAILURES) return { throttledFor: Math.max(1, Math.ceil((failures[0]!.createdAt.getTime() + FAILURE_WINDOW_MS - now.getTime()) / 1000)) };
      const [row] = await tx
        .update(redemptionCodes)
        .set({ redeemedBy: userId, redeemedAt: now })
        .where(
          and(
            eq(redemptionCodes.codeHash, hashOf(code)),
            isNull(redemptionCodes.redeemedBy),
            isNull(redemptionCodes.disabledAt),
            sql`(${redemptionCodes.expiresAt} is null or ${redemptionCodes.expiresAt} > ${now.toISOString()}::timestamptz)`,
          ),
        )
        .returning();
      if (!row) {
        await tx.insert(redemptionFailures).values({ id: newId('rdf'), userId, createdAt: now });
        await tx.delete(redemptionFailures).where(and(eq(redemptionFailures.userId, userId), lt(redemptionFailures.createdAt, since)));
        return { failed: true };
      }
      const reference = `redemption:${row.id}`;
      await ledger.apply(tx, { userId, type: 'topup', amountMicros: row.amountMicros, reference, description: `Redemption code ${row.prefix}…` });
      return { transaction: transactionView((await ledger.byReference(tx, reference))!) };
    });
    if ('throttledFor' in outcome) throw new AppError('rate_limited', 'too many invalid codes; try again later', { 'retry-after': String(outcome.throttledFor) });
    if ('failed' in outcome) throw new AppError('invalid', 'invalid code');
    return { transaction: outcome.transaction };
  }

  return { createBatch, list, disableBatch, redeem };
}

export type Redemption = ReturnType<typeof createRedemption>;

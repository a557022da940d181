/**
 * Adjustments: an operator's signed correction of a wallet, recorded as an `adjustment` ledger
 * entry whose description is the reason. Idempotent on the caller's key (reference
 * `adjustment:<user>:<key>`): the same key and body answer the first entry, another body is 409.
 * A debit may take the balance below zero only when asked to; the wallet row is locked while
 * that is checked, so two concurrent debits cannot both pass on the same balance.
 */
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { MICROS_PER_UNIT } from '../../platform/money';
import { type Ledger, transactionView } from './ledger';

/** Large enough for any correction, small enough that every micro-unit is exact in a JSON number. */
const MAX_ADJUSTMENT = 1_000_000_000n;

export interface AdjustmentInput {
  userId: string;
  /** Major units, signed, at most 6 decimals, not zero. */
  amount: number;
  reason: string;
  allowNegative?: boolean;
  idempotencyKey?: string;
}

/** A signed major-unit amount → micro-units, exactly (through the number's shortest decimal form), or 400. */
function adjustmentMicros(amount: number): bigint {
  const m = Number.isFinite(amount) ? /^(-?)(\d+)(?:\.(\d{1,6}))?$/.exec(String(amount)) : null;
  if (!m) throw new AppError('invalid', 'amount must be a number with at most 6 decimals');
  const magnitude = BigInt(m[2]!) * MICROS_PER_UNIT + BigInt((m[3] ?? '').padEnd(6, '0'));
  if (magnitude === 0n) throw new AppError('invalid', 'amount must not be zero');
  if (magnitude > MAX_ADJUSTMENT * MICROS_PER_UNIT) throw new AppError('invalid', `amount must be at most ${MAX_ADJUSTMENT} in magnitude`);
  return m[1] ? -magnitude : magnitude;
}

/** A reason of 1 to 500 characters, not only spaces (adjustments and refunds); 400 otherwise. */
export function checkReason(reason: string): string {
  const trimmed = reason.trim();
  if (trimmed.length < 1 || reason.length > 500) throw new AppError('invalid', 'reason must be 1 to 500 characters');
  return reason;
}

export function createAdjustments(ledger: Ledger) {
  /** Applies the adjustment in `tx` (the caller's transaction, which may also append its audit entry). */
  async function adjust(tx: DbOrTx, input: AdjustmentInput) {
    const amountMicros = adjustmentMicros(input.amount);
    const reason = checkReason(input.reason);
    const reference = `adjustment:${input.userId}:${input.idempotencyKey ?? newId('adj')}`;
    const same = (r: { userId: string; type: string; amountMicros: bigint; description: string }) =>
      r.userId === input.userId && r.type === 'adjustment' && r.amountMicros === amountMicros && r.description === reason;
    const conflict = () => new AppError('conflict', 'this Idempotency-Key was used for a different adjustment');

    const earlier = await ledger.byReference(tx, reference);
    if (earlier) {
      if (!same(earlier)) throw conflict();
      return { transaction: transactionView(earlier), applied: false };
    }
    const balance = await ledger.lockedBalance(tx, input.userId);
    if (amountMicros < 0n && balance + amountMicros < 0n && !input.allowNegative)
      throw new AppError('conflict', 'the adjustment would take the balance below zero; send allow_negative: true to allow it');
    const result = await ledger.apply(tx, { userId: input.userId, type: 'adjustment', amountMicros, reference, description: reason });
    const row = await ledger.byReference(tx, reference);
    // A concurrent twin with the same key won the insert: the same body answers its entry.
    if (!result.applied && !same(row!)) throw conflict();
    return { transaction: transactionView(row!), applied: result.applied };
  }

  return { adjust };
}

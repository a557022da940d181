/** Billing's own amount formats (top-up cents, provider minor units and decimal strings). */
import { MICROS_PER_UNIT } from '../../platform/money';

export { MICROS_PER_UNIT, toMajor } from '../../platform/money';

/**
 * A top-up amount (major units, at most two decimals) → micro-units, or null when it has more
 * decimals. Goes through the shortest decimal string of the number so 19.99 stays 19.99.
 */
export function centsAmountToMicros(amount: number): bigint | null {
  const m = /^(\d+)(?:\.(\d{1,2}))?$/.exec(String(amount));
  if (!m) return null;
  return BigInt(m[1]!) * MICROS_PER_UNIT + BigInt((m[2] ?? '').padEnd(2, '0')) * 10_000n;
}

/** Micro-units → integer minor units (cents, fen) for provider APIs; top-ups are always whole cents. */
export const toMinorUnits = (micros: bigint): number => Number(micros / 10_000n);
export const fromMinorUnits = (minor: number | bigint): bigint => BigInt(minor) * 10_000n;

/** Micro-units → "12.30" (provider APIs that take decimal strings, documents). */
export function toDecimalString(micros: bigint): string {
  const cents = micros / 10_000n;
  const sign = cents < 0n ? '-' : '';
  const abs = cents < 0n ? -cents : cents;
  return `${sign}${abs / 100n}.${(abs % 100n).toString().padStart(2, '0')}`;
}

/** "12.30" → micro-units, or null when it is not a plain decimal with at most two places. */
export function decimalStringToMicros(value: string): bigint | null {
  const m = /^(\d+)(?:\.(\d{1,2}))?$/.exec(value.trim());
  if (!m) return null;
  return BigInt(m[1]!) * MICROS_PER_UNIT + BigInt((m[2] ?? '').padEnd(2, '0')) * 10_000n;
}

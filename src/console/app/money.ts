/**
 * Amounts arrive as JSON numbers in major units with at most 6 decimals (the server holds
 * micro-units). Each is turned into integer micro-units once, and every sum and every string is
 * made from those integers, so nothing is lost to floating point.
 */

const SYMBOLS: Record<string, string> = { USD: '$', CNY: '¥' };

/** Exact for any amount the API sends: ≤ 6 decimals and under a billion (15 significant digits, which a double always keeps). */
export function toMicros(amount: number): bigint {
  const [whole, fraction = ''] = Math.abs(amount).toFixed(6).split('.');
  const micros = BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
  return amount < 0 ? -micros : micros;
}

/** "$1,234.50", "-¥0.000125": at least two decimals, up to six when the amount has them. */
export function formatMicros(micros: bigint, currency: string): string {
  const negative = micros < 0n;
  const abs = negative ? -micros : micros;
  const whole = (abs / 1_000_000n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const fraction = (abs % 1_000_000n)
    .toString()
    .padStart(6, '0')
    .replace(/0{1,4}$/, '');
  return `${negative ? '-' : ''}${SYMBOLS[currency] ?? `${currency} `}${whole}.${fraction.padEnd(2, '0')}`;
}

export const formatMoney = (amount: number, currency: string) => formatMicros(toMicros(amount), currency);

/** Micro-units as the major-unit number the API takes (exact: at most 6 decimals). */
export const microsToNumber = (micros: bigint) => Number(micros) / 1_000_000;

/** A typed amount ("12", "12.5", "-3.25") to micro-units, or null when it is not a decimal with at most `decimals` places. */
export function parseAmount(text: string, decimals: number, signed = false): bigint | null {
  const m = new RegExp(`^(${signed ? '-?' : ''})(\\d+)(?:\\.(\\d{1,${decimals}}))?$`).exec(text.trim());
  if (!m) return null;
  const micros = BigInt(m[2]!) * 1_000_000n + BigInt((m[3] ?? '').padEnd(6, '0'));
  return m[1] ? -micros : micros;
}

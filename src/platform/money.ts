/**
 * Money is bigint micro-units (millionths of the major unit) everywhere inside, so a request's cost (a fraction of a cent) is never rounded away;
 * these are the only conversions to and from major units, used at the HTTP edge.
 */
export const MICROS_PER_UNIT = 1_000_000n;

function splitMicros(micros: bigint): [sign: string, whole: bigint, fraction: string] {
  const abs = micros < 0n ? -micros : micros;
  return [micros < 0n ? '-' : '', abs / MICROS_PER_UNIT, (abs % MICROS_PER_UNIT).toString().padStart(6, '0')];
}

/** Micro-units → a JSON number in major units. Exact for every amount below 2^53 micro-units. */
export function toMajor(micros: bigint): number {
  return Number(microsToDecimal(micros));
}

/** Micro-units → an exact decimal string in major units ("0.000015"), e.g. for the X-Cost header. */
export function microsToDecimal(micros: bigint): string {
  const [sign, whole, fraction] = splitMicros(micros);
  return `${sign}${whole}.${fraction}`;
}

/** Major units (a JSON number) → micro-units; rounding absorbs binary float noise (0.1 → 100000). */
export const majorToMicros = (major: number): bigint => BigInt(Math.round(major * 1_000_000));

/** Amounts at or beyond this many major units do not fit a bigint column of micro-units (2^63 ≈ 9.2e18). */
export const MAX_MAJOR = 1e12;

/**
 * Major units (a JSON number) → micro-units, or null when the number has more than 6 decimals
 * (money is never rounded silently) or is not below MAX_MAJOR in size. Reads the number's shortest
 * decimal form ("4e-7" included).
 */
export function exactMajorToMicros(major: number): bigint | null {
  if (!Number.isFinite(major) || Math.abs(major) >= MAX_MAJOR) return null;
  const m = /^-?(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(major));
  if (!m) return null;
  const places = (m[2]?.length ?? 0) - Number(m[3] ?? 0);
  return places > 6 ? null : majorToMicros(major);
}

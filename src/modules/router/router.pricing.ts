/**
 * What a request costs. (prompt + completion tokens) × the per-million price
 * / 10^6, rounded half up to a micro-unit, or the per-request price. USD for reports: the same on
 * the international site, × USD_PER_CNY (rounded half up) on the China site.
 */
export interface Price {
  unit: 'per_million_tokens' | 'per_request';
  priceMicros: bigint;
}

const MILLION = 1_000_000n;
const HALF = 500_000n;

export function costOf(price: Price, promptTokens: number, completionTokens: number): bigint {
  if (price.unit === 'per_request') return price.priceMicros;
  return (BigInt(promptTokens + completionTokens) * price.priceMicros + HALF) / MILLION;
}

/** A converter from site micro-units to USD micro-units. */
export function usdConverter(site: 'intl' | 'cn', usdPerCny: number): (micros: bigint) => bigint {
  if (site === 'intl') return (m) => m;
  const rate = BigInt(Math.round(usdPerCny * 1_000_000));
  return (m) => (m * rate + HALF) / MILLION;
}

/** Completion tokens reserved for a request that sets no max_tokens (see docs/gateway.md). */
export const DEFAULT_COMPLETION_RESERVE = 4096;

/**
 * An upper estimate of a request's cost for admission: prompt tokens bounded by the body's byte
 * length (a BPE token is at least one byte), completion by max_completion_tokens / max_tokens.
 */
export function estimateCost(price: Price, bodyBytes: number, body: Record<string, unknown>): bigint {
  if (price.unit === 'per_request') return price.priceMicros;
  const max = [body.max_completion_tokens, body.max_tokens].find((v) => typeof v === 'number' && Number.isInteger(v) && v > 0) as number | undefined;
  return costOf(price, bodyBytes, max ?? DEFAULT_COMPLETION_RESERVE);
}

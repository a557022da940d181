/**
 * What a request costs: (prompt + completion tokens) × the per-million price
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

export interface EstimateSettings {
  /** Prompt tokens counted for each image part (IMAGE_TOKENS). */
  imageTokens: number;
  /** Completion tokens counted when the request sets no max_tokens (ADMISSION_DEFAULT_MAX_TOKENS). */
  defaultMaxTokens: number;
}

/** Tokens a chat template may add around the messages (role headers, a default system line). */
const TEMPLATE_TOKENS = 64;

const isImagePart = (part: unknown): part is object => {
  const p = part as { type?: unknown; image_url?: unknown } | null;
  return !!p && typeof p === 'object' && (p.type === 'image_url' || p.type === 'input_image' || p.image_url !== undefined);
};

/**
 * An upper bound of the prompt's tokens from the whole body: every byte of it except the image
 * parts (a text token stands for at least one byte, and the JSON around messages, tools and
 * templates outweighs what a chat template adds), plus TEMPLATE_TOKENS, plus imageTokens per
 * image part (an image costs what the model's vision encoder makes of it, not its URL's bytes).
 */
export function promptTokenBound(body: Record<string, unknown>, bodyBytes: number, imageTokens: number): number {
  let imageBytes = 0;
  let images = 0;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages) {
    const content = (m as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) continue;
    for (const part of content)
      if (isImagePart(part)) {
        images++;
        imageBytes += JSON.stringify(part).length;
      }
  }
  return Math.max(0, bodyBytes - imageBytes) + TEMPLATE_TOKENS + images * imageTokens;
}

/**
 * An upper bound of a request's cost for admission: the prompt bound above, and completion
 * tokens bounded by max_completion_tokens / max_tokens or the configured default.
 */
export function estimateCost(price: Price, bodyBytes: number, body: Record<string, unknown>, settings: EstimateSettings): bigint {
  if (price.unit === 'per_request') return price.priceMicros;
  const max = [body.max_completion_tokens, body.max_tokens].find((v) => typeof v === 'number' && Number.isInteger(v) && v > 0) as number | undefined;
  return costOf(price, promptTokenBound(body, bodyBytes, settings.imageTokens), max ?? settings.defaultMaxTokens);
}

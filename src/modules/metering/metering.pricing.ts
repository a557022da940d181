/**
 * What a request costs, in one exact sum rounded once: per-million prices,
 * ((prompt − cached) × input + cached × cached input + completion × output) × multiplier
 * / (10^6 × 10^4), rounded half up to a micro-unit; a per-request price × multiplier the same way.
 * The multiplier is the caller's price group's, in ten-thousandths (10000 = ×1). USD for reports:
 * the same on the international site, × USD_PER_CNY (rounded half up) on the China site.
 */
export interface Price {
  unit: 'per_million_tokens' | 'per_request';
  /** The per-request price (per_request); the per-million price fields below are what tokens cost. */
  priceMicros: bigint;
  inputMicros: bigint;
  outputMicros: bigint;
  cachedInputMicros: bigint;
  /** The price group's multiplier in ten-thousandths (10000n: ×1). */
  multiplierE4: bigint;
}

const MILLION = 1_000_000n;
const HALF = 500_000n;
/** Per-million prices × a multiplier in ten-thousandths: one division by 10^10 makes micro-units. */
const SCALE = 10_000_000_000n;
const HALF_SCALE = 5_000_000_000n;
const E4 = 10_000n;

/** Cached tokens are within the prompt's (clamped to them). */
export function costOf(price: Price, promptTokens: number, completionTokens: number, cachedTokens = 0): bigint {
  if (price.unit === 'per_request') return (price.priceMicros * price.multiplierE4 + E4 / 2n) / E4;
  const cached = BigInt(Math.min(Math.max(cachedTokens, 0), promptTokens));
  const prompt = BigInt(promptTokens) - cached;
  const sum = prompt * price.inputMicros + cached * price.cachedInputMicros + BigInt(completionTokens) * price.outputMicros;
  return (sum * price.multiplierE4 + HALF_SCALE) / SCALE;
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
  /** Completion tokens per choice counted when the request sets no maximum (ADMISSION_DEFAULT_MAX_TOKENS). */
  defaultMaxTokens: number;
}

/** Tokens a chat template may add around the messages (role headers, a default system line). */
const TEMPLATE_TOKENS = 64;

/**
 * An image part: its `type` says so (`image_url` in chat, `input_image` as vLLM also takes it), and
 * nothing else does. A text part that carries an `image_url` key is text to the model, and counts.
 */
const isImagePart = (part: unknown): part is { image_url?: unknown } => {
  const type = (part as { type?: unknown } | null)?.type;
  return type === 'image_url' || type === 'input_image';
};

/**
 * An upper bound of the prompt's tokens from the whole body: every byte of it except the images
 * (a text token stands for at least one byte, and the JSON around messages, tools and templates
 * outweighs what a chat template adds), plus TEMPLATE_TOKENS, plus imageTokens per image part (an
 * image costs what the model's vision encoder makes of it, not its URL's bytes). Only an image
 * part's `image_url` leaves the count: any other key it carries is counted like the rest.
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
        // Its length in UTF-16 units is at most its bytes in the body: never more is taken off than it holds.
        imageBytes += JSON.stringify(part.image_url ?? null).length;
      }
  }
  return Math.max(0, bodyBytes - imageBytes) + TEMPLATE_TOKENS + images * imageTokens;
}

const positiveInteger = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0;

/**
 * The completion a request may ask for: `choices` (its `n`, at least 1) of at most `perChoice`
 * tokens each, the larger of max_completion_tokens and max_tokens (servers take one or the other
 * first); null when it sets neither.
 */
export function completionAsked(body: Record<string, unknown>): { choices: number; perChoice: number | null } {
  const choices = positiveInteger(body.n) ? body.n : 1;
  const set = [body.max_completion_tokens, body.max_tokens].filter(positiveInteger);
  return { choices, perChoice: set.length ? Math.max(...set) : null };
}

/** What admission holds for a request: its prompt bound, and its completion bound (choices × per choice). */
export interface RequestBound {
  promptTokens: number;
  choices: number;
  /** The caller's maximum per choice, or the configured default. */
  perChoice: number;
  /** The caller set a maximum (max_tokens, max_completion_tokens; Responses' max_output_tokens becomes max_tokens). */
  callerMax: boolean;
}

export function requestBound(body: Record<string, unknown>, bodyBytes: number, settings: EstimateSettings): RequestBound {
  const { choices, perChoice } = completionAsked(body);
  return { promptTokens: promptTokenBound(body, bodyBytes, settings.imageTokens), choices, perChoice: perChoice ?? settings.defaultMaxTokens, callerMax: perChoice !== null };
}

/**
 * An upper bound of a request's cost for admission: the prompt bound above, and the completion
 * bounded by max(n, 1) × (max_completion_tokens / max_tokens, or the configured default per choice).
 */
export function estimateCost(price: Price, bound: RequestBound): bigint {
  return costOf(holdPrice(price), bound.promptTokens, bound.choices * bound.perChoice);
}

/** The price a hold is taken at: prompt tokens at the higher of the input and cached input prices (none is known cached yet). */
const holdPrice = (price: Price): Price => (price.cachedInputMicros > price.inputMicros ? { ...price, inputMicros: price.cachedInputMicros } : price);

/**
 * Completion tokens per choice a request is served with at least, when its wallet (or key) cannot
 * hold its whole bound: an answer cut shorter is of little use, and its prompt costs all the same.
 */
export const MIN_ALLOWANCE_PER_CHOICE = 64;

/**
 * The least a request is served with: its prompt bound and MIN_ALLOWANCE_PER_CHOICE tokens per
 * choice (its own maximum when smaller; the per-request price as it is).
 */
export function minimumCost(price: Price, bound: RequestBound): bigint {
  return costOf(holdPrice(price), bound.promptTokens, bound.choices * Math.min(bound.perChoice, MIN_ALLOWANCE_PER_CHOICE));
}

/**
 * The most completion tokens whose cost with `promptTokens` of prompt (at the higher of the input
 * and cached input prices, as the hold bounds it) is at most `micros`; unbounded at a zero price.
 */
export function completionWithin(price: Price, micros: bigint, promptTokens: number): number {
  const perToken = price.outputMicros * price.multiplierE4;
  if (perToken <= 0n) return Number.POSITIVE_INFINITY;
  const input = holdPrice(price).inputMicros;
  // cost ≤ micros ⟺ (prompt × input + c × output) × m + HALF_SCALE < (micros + 1) × SCALE.
  const most = ((micros + 1n) * SCALE - HALF_SCALE - 1n - BigInt(promptTokens) * input * price.multiplierE4) / perToken;
  if (most < 0n) return 0;
  return most > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(most);
}

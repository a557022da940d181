/** The admission's upper bound of a request's cost (metering.pricing.ts). */
import { describe, expect, test } from 'bun:test';
import { type Price, completionWithin, costOf, estimateCost, minimumCost, promptTokenBound, requestBound } from '../../../src/modules/metering/metering.pricing';

/** One price for every token kind, ×1: what a row without input/output/cached prices means. */
const flat = (unit: Price['unit'], priceMicros: bigint): Price => ({ unit, priceMicros, inputMicros: priceMicros, outputMicros: priceMicros, cachedInputMicros: priceMicros, multiplierE4: 10_000n });

const settings = { imageTokens: 1500, defaultMaxTokens: 4096 };
const perToken = flat('per_million_tokens', 1_000_000n); // one micro-unit per token
const bytesOf = (body: unknown) => JSON.stringify(body).length;
const estimate = (body: Record<string, unknown>, s = settings) => estimateCost(perToken, requestBound(body, bytesOf(body), s));

describe('admission upper bound', () => {
  test("an image part counts IMAGE_TOKENS, not its image's bytes; every other byte of the body counts", () => {
    const url = { url: `data:image/png;base64,${'A'.repeat(100_000)}` };
    const image = { type: 'image_url', image_url: url };
    const body = { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is it?' }, image] }], tools: [{ type: 'function', function: { name: 'f' } }] };
    const bytes = bytesOf(body);
    expect(promptTokenBound(body, bytes, 1500)).toBe(bytes - bytesOf(url) + 64 + 1500);
    // Two images: twice the image tokens.
    const two = { ...body, messages: [{ role: 'user', content: [image, image] }] };
    expect(promptTokenBound(two, bytesOf(two), 1500)).toBe(bytesOf(two) - 2 * bytesOf(url) + 64 + 3000);
    // vLLM's `input_image` parts are images too.
    const vllm = { model: 'm', messages: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png' }] }] };
    expect(promptTokenBound(vllm, bytesOf(vllm), 1500)).toBe(bytesOf(vllm) - bytesOf('https://example.com/a.png') + 64 + 1500);
  });

  test('only the type makes an image: a text part with an `image_url` key counts whole, and an image part counts its other keys', () => {
    const words = 'word '.repeat(20_000);
    for (const image_url of [null, { url: 'https://example.com/a.png' }, 'x']) {
      const body = { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: words, image_url }] }] };
      expect(promptTokenBound(body, bytesOf(body), 1500)).toBe(bytesOf(body) + 64);
    }
    const url = { url: 'https://example.com/a.png' };
    const smuggled = { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: url, text: words }] }] };
    expect(promptTokenBound(smuggled, bytesOf(smuggled), 1500)).toBe(bytesOf(smuggled) - bytesOf(url) + 64 + 1500);
    expect(promptTokenBound(smuggled, bytesOf(smuggled), 1500)).toBeGreaterThan(words.length);
  });

  test('completion: max(n, 1) × (max_completion_tokens or max_tokens, the larger, else the default per choice); per-request prices as they are', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    const prompt = (b: unknown) => bytesOf(b) + 64;
    expect(estimate(body)).toBe(BigInt(prompt(body) + 4096));
    for (const [extra, completion] of [
      [{ max_tokens: 5 }, 5],
      [{ max_completion_tokens: 7 }, 7],
      [{ max_completion_tokens: 7, max_tokens: 5 }, 7],
      [{ max_completion_tokens: 5, max_tokens: 7 }, 7],
      [{ n: 20, max_tokens: 100 }, 2000],
      [{ n: 3 }, 3 * 4096],
      [{ n: 1, max_tokens: null }, 4096],
      [{ n: null, max_completion_tokens: 9 }, 9],
    ] as const) {
      const b = { ...body, ...extra };
      expect([extra, estimate(b)]).toEqual([extra, BigInt(prompt(b) + completion)]);
    }
    expect(estimate(body, { ...settings, defaultMaxTokens: 100 })).toBe(BigInt(prompt(body) + 100));
    expect(estimateCost(flat('per_request', 2000n), requestBound(body, bytesOf(body), settings))).toBe(2000n);
  });

  test('the minimum is the prompt bound and 64 tokens per choice, or the whole bound when it asks fewer', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }], n: 4 };
    const bound = requestBound(body, bytesOf(body), settings);
    expect(bound).toEqual({ promptTokens: bytesOf(body) + 64, choices: 4, perChoice: 4096, callerMax: false });
    expect(minimumCost(perToken, bound)).toBe(BigInt(bytesOf(body) + 64 + 4 * 64));
    const few = { ...body, max_tokens: 50 };
    expect(minimumCost(perToken, requestBound(few, bytesOf(few), settings))).toBe(estimate(few));
    expect(minimumCost(flat('per_request', 2000n), bound)).toBe(2000n);
  });

  test('completionWithin: the most completion tokens whose rounded cost with the prompt fits, at every price and multiplier', () => {
    for (const priceMicros of [1n, 7n, 1_000n, 999_999n, 1_000_000n, 1_500_000n, 30_000_000n])
      for (const multiplierE4 of [10_000n, 1n, 12_345n, 100_000n]) {
        const price: Price = { ...flat('per_million_tokens', priceMicros), inputMicros: priceMicros * 3n, multiplierE4 };
        for (const micros of [0n, 1n, 2n, 999n, 15_000n, 1_000_000n])
          for (const prompt of [0, 10]) {
            const c = completionWithin(price, micros, prompt);
            if (costOf(price, prompt, 0) > micros) expect(c).toBe(0);
            else if (c < Number.MAX_SAFE_INTEGER) {
              expect(costOf(price, prompt, c)).toBeLessThanOrEqual(micros);
              expect(costOf(price, prompt, c + 1)).toBeGreaterThan(micros);
            }
          }
      }
    expect(completionWithin(flat('per_million_tokens', 0n), 0n, 5)).toBe(Number.POSITIVE_INFINITY);
  });

  test('cost: (prompt − cached) × input + cached × cached input + completion × output, × the multiplier, rounded half up once', () => {
    const price: Price = { unit: 'per_million_tokens', priceMicros: 0n, inputMicros: 2_500_000n, outputMicros: 10_000_000n, cachedInputMicros: 1_250_000n, multiplierE4: 10_000n };
    // 800 × 2.5 + 200 × 1.25 + 300 × 10 = 5250 micro-units.
    expect(costOf(price, 1000, 300, 200)).toBe(5250n);
    // × 0.85 = 4462.5 → 4463 (half up).
    expect(costOf({ ...price, multiplierE4: 8_500n }, 1000, 300, 200)).toBe(4463n);
    // Cached tokens above the prompt count as the whole prompt cached.
    expect(costOf(price, 10, 0, 50)).toBe(costOf(price, 10, 0, 10));
    // A per-request price × the multiplier.
    expect(costOf({ ...flat('per_request', 2000n), multiplierE4: 15_001n }, 9, 9)).toBe(3000n);
    // The hold takes the prompt at the higher of input and cached input.
    const bound = { promptTokens: 100, choices: 1, perChoice: 10, callerMax: true };
    expect(estimateCost({ ...price, cachedInputMicros: 5_000_000n }, bound)).toBe(600n);
  });
});

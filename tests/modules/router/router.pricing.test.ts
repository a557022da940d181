/** The admission's upper bound of a request's cost (router.pricing.ts). */
import { describe, expect, test } from 'bun:test';
import { estimateCost, promptTokenBound } from '../../../src/modules/router/router.pricing';

const settings = { imageTokens: 1500, defaultMaxTokens: 4096 };
const perToken = { unit: 'per_million_tokens' as const, priceMicros: 1_000_000n }; // one micro-unit per token

describe('admission upper bound', () => {
  test('an image part counts IMAGE_TOKENS, not its bytes; every other byte of the body counts', () => {
    const image = { type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(100_000)}` } };
    const body = { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is it?' }, image] }], tools: [{ type: 'function', function: { name: 'f' } }] };
    const bytes = JSON.stringify(body).length;
    const bound = promptTokenBound(body, bytes, 1500);
    expect(bound).toBe(bytes - JSON.stringify(image).length + 64 + 1500);
    // Two images: twice the image tokens.
    const two = { ...body, messages: [{ role: 'user', content: [image, image] }] };
    expect(promptTokenBound(two, JSON.stringify(two).length, 1500)).toBe(JSON.stringify(two).length - 2 * JSON.stringify(image).length + 64 + 3000);
  });

  test('completion: max_completion_tokens or max_tokens, else the configured default; per-request prices as they are', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    const bytes = JSON.stringify(body).length;
    expect(estimateCost(perToken, bytes, body, settings)).toBe(BigInt(bytes + 64 + 4096));
    expect(estimateCost(perToken, bytes, { ...body, max_tokens: 5 }, settings)).toBe(BigInt(bytes + 64 + 5));
    expect(estimateCost(perToken, bytes, { ...body, max_completion_tokens: 7, max_tokens: 5 }, settings)).toBe(BigInt(bytes + 64 + 7));
    expect(estimateCost(perToken, bytes, body, { ...settings, defaultMaxTokens: 100 })).toBe(BigInt(bytes + 64 + 100));
    expect(estimateCost({ unit: 'per_request', priceMicros: 2000n }, bytes, body, settings)).toBe(2000n);
  });
});

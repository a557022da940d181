/**
 * Property: a request's admission hold bounds what it is billed, whatever its shape — n choices,
 * content parts of every type and with extra keys, images, tools, each maximum field or none,
 * stream or not, chat or Responses — whatever the upstream generates (reasoning, refusals, tool and
 * function calls, with or without usage), and whether the wallet holds the request's whole bound or
 * only part of it (then the request is served with a completion allowance). The upstream tells the
 * truth: it counts the prompt with a real tokenizer and images at most IMAGE_TOKENS, and stops each
 * choice at the maximum it is sent.
 *
 * Through the gateway and the router's real path: the router compares every request's cost with
 * its hold when it commits the usage, and logs when the cost is above (the last test shows it
 * does); the test checks that no run logged it, and that each wallet lost what its usage row cost.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import type { FakeBehaviour } from '../../support/fake-upstream';
import { fundedUser, type Harness, startHarness } from '../gateway/gateway-harness';

const IMAGE_TOKENS = 1500;
const ABOVE_HOLD = 'request cost above its admission hold';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: { IMAGE_TOKENS: String(IMAGE_TOKENS) } });
  await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
});
afterAll(() => h.close());

const word = fc.constantFrom('alpha', 'beta', 'gamma', 'delta', 'naïve', '北京', 'x', '{', '[[', '"q"', 'emoji😀', '\\n');
/** Up to `max` words: a few runs of one word each, so long texts cost little to make. */
const words = (max: number) =>
  fc.array(fc.tuple(word, fc.integer({ min: 1, max: Math.ceil(max / 3) })), { maxLength: 3 }).map((runs) => runs.map(([w, k]) => `${w} `.repeat(k)).join(''));
const url = fc.constantFrom('https://example.com/cat.png', `data:image/png;base64,${'A'.repeat(2000)}`);
/** Keys a part may carry besides its own: what a client or a library leaves in. */
const extraKeys = fc.record({ image_url: fc.constantFrom(null, 'x', { url: 'https://example.com/a.png' }), text: words(30), cache_control: fc.constant({ type: 'ephemeral' }) }, { requiredKeys: [] });

/** A chat content part: text (with any extra keys, an `image_url` one included) or an image (with a smuggled `text`), and the vision tokens the truthful model gives an image. */
const chatPart = fc.oneof(
  fc.record({ text: words(3000), extra: extraKeys }).map(({ text, extra }) => ({ part: { ...extra, type: 'text', text }, image: 0 })),
  fc.record({ text: words(20) }).map(({ text }) => ({ part: { type: 'input_text', text }, image: 0 })),
  fc.record({ url, smuggled: fc.option(words(3000), { nil: undefined, freq: 2 }), vision: fc.integer({ min: 1, max: IMAGE_TOKENS }) }).map(({ url, smuggled, vision }) => ({
    part: { type: 'image_url', image_url: { url }, ...(smuggled === undefined ? {} : { text: smuggled }) },
    image: vision,
  })),
);

const tool = fc.record({ name: fc.constantFrom('lookup', 'get_weather'), description: words(10), depth: fc.integer({ min: 0, max: 5 }) }).map(({ name, description, depth }) => {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) schema = { type: 'object', properties: { [`p${i}`]: schema } };
  return { name, description, parameters: { type: 'object', properties: { q: schema } } };
});

/** What the upstream answers: text (reasoning first, or not), a refusal, tool calls or a legacy function call; usage or not. */
const answer: fc.Arbitrary<Partial<FakeBehaviour>> = fc
  .record({
    kind: fc.constantFrom('content', 'refusal', 'tools', 'function'),
    text: words(600),
    reasoning: fc.oneof(fc.constant(''), words(300)),
    reasoningField: fc.constantFrom('reasoning_content' as const, 'reasoning' as const),
    calls: fc.array(words(30).map((a) => ({ name: 'lookup', arguments: JSON.stringify({ q: a }) })), { minLength: 1, maxLength: 3 }),
    usage: fc.boolean(),
  })
  .map(({ kind, text, reasoning, reasoningField, calls, usage }) => ({
    content: text,
    reasoning,
    reasoningField,
    refusal: kind === 'refusal' ? text : null,
    toolCalls: kind === 'tools' ? calls : null,
    functionCall: kind === 'function' ? calls[0]! : null,
    usage,
  }));

const maxTokens = fc.integer({ min: 1, max: 400 });

/** A request: its raw body, where it goes, and the vision tokens of its images (for the truthful upstream). */
const request = fc.oneof(
  fc
    .record({
      stream: fc.boolean(),
      n: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined, freq: 2 }),
      max: fc.oneof(
        fc.constant({}),
        maxTokens.map((m) => ({ max_tokens: m })),
        maxTokens.map((m) => ({ max_completion_tokens: m })),
        fc.tuple(maxTokens, maxTokens).map(([a, b]) => ({ max_tokens: a, max_completion_tokens: b })),
      ),
      content: fc.oneof(words(80).map((text) => ({ content: text as unknown, images: [] as number[] })), fc.array(chatPart, { minLength: 1, maxLength: 4 }).map((parts) => ({ content: parts.map((p) => p.part) as unknown, images: parts.map((p) => p.image) }))),
      tools: fc.option(fc.array(tool, { minLength: 1, maxLength: 2 }), { nil: undefined, freq: 2 }),
    })
    .map(({ stream, n, max, content, tools }) => ({
      path: '/v1/chat/completions',
      body: {
        model: 'm1',
        messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: content.content }],
        stream,
        ...(n === undefined ? {} : { n }),
        ...max,
        ...(tools ? { tools: tools.map((f) => ({ type: 'function', function: f })) } : {}),
      } as Record<string, unknown>,
      images: content.images,
    })),
  fc
    .record({
      stream: fc.boolean(),
      max: fc.option(maxTokens, { nil: undefined, freq: 2 }),
      input: words(80),
      image: fc.option(fc.record({ url, vision: fc.integer({ min: 1, max: IMAGE_TOKENS }) }), { nil: undefined, freq: 2 }),
      instructions: fc.option(words(20), { nil: undefined, freq: 2 }),
      tools: fc.option(fc.array(tool, { minLength: 1, maxLength: 2 }), { nil: undefined, freq: 2 }),
    })
    .map(({ stream, max, input, image, instructions, tools }) => ({
      path: '/v1/responses',
      body: {
        model: 'm1',
        input: [{ role: 'user', content: [{ type: 'input_text', text: input }, ...(image ? [{ type: 'input_image', image_url: image.url }] : [])] }],
        stream,
        ...(max === undefined ? {} : { max_output_tokens: max }),
        ...(instructions === undefined ? {} : { instructions }),
        ...(tools ? { tools: tools.map((f) => ({ type: 'function', ...f })) } : {}),
      } as Record<string, unknown>,
      images: image ? [image.vision] : [],
    })),
);

/** The prompt as a real server counts it: the messages' texts (not an image part's smuggled text), each message's template tokens, the tools, the images' vision tokens. */
function truthfulPrompt(chat: Record<string, any>, images: number[]): number {
  let tokens = 3;
  for (const m of chat.messages) {
    tokens += 4;
    const parts = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : (m.content ?? []);
    for (const p of parts) if (p.type !== 'image_url' && typeof p.text === 'string') tokens += countTokens(p.text);
  }
  if (chat.tools) tokens += countTokens(JSON.stringify(chat.tools));
  return tokens + images.reduce((a, b) => a + b, 0);
}

describe('the hold bounds the bill (property, postgres)', () => {
  test('every request shape, every answer, a wallet with the whole bound or less', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(request, answer, fc.oneof(fc.constant(100_000_000n), fc.bigInt({ min: 50_000n, max: 3_000_000n })), async (req, behaviour, balance) => {
        runs++;
        h.up.set((chat) => ({ ...behaviour, promptTokens: truthfulPrompt(chat, req.images) }));
        const u = await fundedUser(h, balance);
        const logged = h.t.logs.length;
        const res = await fetch(`${h.baseUrl}${req.path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${u.key.key}`, 'content-type': 'application/json' },
          body: JSON.stringify(req.body),
        });
        const text = await res.text();
        expect([res.status, text.slice(0, 300)]).toEqual([200, expect.any(String)]);
        await h.t.services.router.flushUsage();
        const rows = await h.t.ctx.database.query<{ cost: string; status: number }>(sql`select cost_micros::text as cost, status from router_usage where user_id = ${u.user.id}`);
        expect(rows).toEqual([{ cost: expect.any(String), status: 200 }]);
        expect(await u.balance()).toBe(balance - BigInt(rows[0]!.cost));
        expect(h.t.logs.slice(logged).filter((l) => l.includes(ABOVE_HOLD))).toEqual([]);
      }),
      { numRuns: 150 },
    );
    expect(runs).toBeGreaterThanOrEqual(150);
    h.up.reset();
  }, 120_000);

  test('the check is not idle: an upstream counting more prompt tokens than the body bounds is logged', async () => {
    h.up.set({ promptTokens: 100_000 });
    const u = await fundedUser(h, 1_000_000_000n);
    const logged = h.t.logs.length;
    const r = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 });
    expect(r.usage?.prompt_tokens).toBe(100_000);
    const lines = h.t.logs.slice(logged).filter((l) => l.includes(ABOVE_HOLD));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ prompt_tokens: 100_000, cost_micros: String(100_005n * 1000n) });
    h.up.reset();
  });
});

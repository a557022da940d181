/** POST /v1/embeddings through the official openai client: routed, failed over, billed on input tokens. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { sql } from 'drizzle-orm';
import { startFakeUpstream } from '../../support/fake-upstream';
import { fundedUser, type Harness, startHarness } from './gateway-harness';

// 1000 per million tokens: 1000 micro-units per input token.
const PER_TOKEN = 1000n;

let h: Harness;
let dead: string;

beforeAll(async () => {
  const closed = await startFakeUpstream();
  dead = closed.url;
  await closed.close();
  const up = await startFakeUpstream({ models: ['m1'] });
  h = await startHarness({ upstream: up, backends: `m1=${dead},m1=${up.url},flat=${up.url},keyed=${up.url}#env:EMBED_UPSTREAM_KEY`, env: { ROUTES: 'auto=fallback:m1', EMBED_UPSTREAM_KEY: 'sk-embed-upstream-key' } });
  await h.t.services.pricing.setModelPrices([
    { slug: 'm1', unit: 'per_million_tokens', price: 1000 },
    { slug: 'flat', unit: 'per_request', price: 0.25 },
    { slug: 'keyed', unit: 'per_million_tokens', price: 1000 },
  ]);
});
afterAll(async () => {
  await h.close();
  await h.up.close();
});

const usageRows = (userId: string) => h.t.ctx.database.query<Record<string, any>>(sql`select * from router_usage where user_id = ${userId} order by created_at, id`);

describe('embeddings', () => {
  test('strings: vectors in order, usage.cost, X-Cost, exact debit, one usage row (after failing over a dead backend)', async () => {
    h.up.reset();
    const u = await fundedUser(h, 1_000_000n);
    const { data, response } = await u.client.embeddings.create({ model: 'm1', input: ['one two', 'three'] }).withResponse();
    expect(data.data.map((d) => [d.index, Array.from(d.embedding)])).toEqual([
      [0, [0, 2, 0.5]],
      [1, [1, 1, 0.5]],
    ]);
    expect(data.model).toBe('m1');
    expect(data.usage).toEqual({ prompt_tokens: 3, total_tokens: 3, cost: 0.003 } as never);
    expect(response.headers.get('x-cost')).toBe('0.003000');
    const sent = h.up.requests.filter((r) => r.path === '/v1/embeddings').at(-1)!.body!;
    expect(sent).toMatchObject({ model: 'm1', input: ['one two', 'three'] });
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - 3n * PER_TOKEN);
    const rows = await usageRows(u.user.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ entrypoint: 'm1', model: 'm1', prompt_tokens: 3, completion_tokens: 0, status: 200, streamed: false, tokens_counted: false });
    expect(BigInt(rows[0]!.cost_micros)).toBe(3n * PER_TOKEN);
    expect(h.t.services.router.listBackends().find((b) => b.url === dead)!.healthy).toBe(false);
  });

  test('one string, one token array, several token arrays, float encoding; a route name keeps its entrypoint', async () => {
    const u = await fundedUser(h, 1_000_000n);
    expect((await u.client.embeddings.create({ model: 'm1', input: 'a b c d' })).usage.prompt_tokens).toBe(4);
    expect((await u.client.embeddings.create({ model: 'm1', input: [5, 6, 7] })).usage.prompt_tokens).toBe(3);
    const r = await u.client.embeddings.create({ model: 'auto', input: [[1, 2], [3]], encoding_format: 'float' });
    expect(r.data.map((d) => d.embedding)).toEqual([
      [0, 2, 0.5],
      [1, 1, 0.5],
    ]);
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - (4n + 3n + 3n) * PER_TOKEN);
    expect((await usageRows(u.user.id)).map((x) => [x.entrypoint, x.model, x.prompt_tokens])).toEqual([
      ['m1', 'm1', 4],
      ['m1', 'm1', 3],
      ['auto', 'm1', 3],
    ]);
  });

  test('no upstream usage: texts counted with o200k, token arrays by length; a per-request price is the price', async () => {
    h.up.set({ usage: false });
    const u = await fundedUser(h, 1_000_000n);
    const r = await u.client.embeddings.create({ model: 'm1', input: ['how many tokens is this?', [9, 9]] as never });
    const expected = countTokens('how many tokens is this?') + 2;
    expect(r.usage.prompt_tokens).toBe(expected);
    const flat = await u.client.embeddings.create({ model: 'flat', input: 'x' });
    expect((flat.usage as unknown as { cost: number }).cost).toBe(0.25);
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - BigInt(expected) * PER_TOKEN - 250_000n);
    expect((await usageRows(u.user.id))[0]!.tokens_counted).toBe(true);
    h.up.reset();
  });

  test('a backend with an API key gets it as a bearer token; the caller never sees it', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const res = await fetch(`${h.baseUrl}/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${u.key.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'keyed', input: 'a' }) });
    expect(res.status).toBe(200);
    expect(await res.text()).not.toContain('sk-embed-upstream-key');
    const sent = h.up.requests.filter((r) => r.path === '/v1/embeddings').at(-1)!;
    expect(sent.headers.authorization).toBe('Bearer sk-embed-upstream-key');
    expect(sent.body!.model).toBe('keyed');
  });

  test('the usage row and its debit are committed before the answer ends (no flush needed)', async () => {
    const u = await fundedUser(h, 1_000_000n);
    await u.client.embeddings.create({ model: 'm1', input: 'one two three' });
    expect(await usageRows(u.user.id)).toHaveLength(1);
    expect(await u.balance()).toBe(1_000_000n - 3n * PER_TOKEN);
  });

  test('bad input is 400 {error}, reaches no upstream and charges nothing', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const before = h.up.stats.embeddings;
    const cases: Array<[string, unknown]> = [
      ['no input', { model: 'm1' }],
      ['null input', { model: 'm1', input: null }],
      ['empty string', { model: 'm1', input: '' }],
      ['empty array', { model: 'm1', input: [] }],
      ['too many items', { model: 'm1', input: Array.from({ length: 2049 }, () => 'x') }],
      ['a number among strings', { model: 'm1', input: ['a', 1] }],
      ['an object item', { model: 'm1', input: [{ text: 'a' }] }],
      ['an empty string item', { model: 'm1', input: ['a', ''] }],
      ['a token array with a string', { model: 'm1', input: [[1, 'x']] }],
      ['negative token', { model: 'm1', input: [[1, -2]] }],
      ['input a number', { model: 'm1', input: 5 }],
      ['bad encoding', { model: 'm1', input: 'a', encoding_format: 'hex' }],
      ['bad dimensions', { model: 'm1', input: 'a', dimensions: 0 }],
      ['no model', { input: 'a' }],
    ];
    for (const [what, body] of cases) {
      const res = await fetch(`${h.baseUrl}/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${u.key.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect([what, res.status]).toEqual([what, 400]);
      expect(typeof ((await res.json()) as { error: unknown }).error).toBe('string');
    }
    // 2048 items is the limit, not past it.
    const ok = await u.client.embeddings.create({ model: 'm1', input: Array.from({ length: 2048 }, () => 'x') });
    expect(ok.data).toHaveLength(2048);
    expect(h.up.stats.embeddings).toBe(before + 1);
    await h.t.services.router.flushUsage();
    expect(await usageRows(u.user.id)).toHaveLength(1);
    expect(await u.balance()).toBe(1_000_000n - 2048n * PER_TOKEN);
  });

  test('unknown or unpriced model is 404; no balance is 402', async () => {
    const broke = await fundedUser(h, 0n);
    const post = (model: string) =>
      fetch(`${h.baseUrl}/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${broke.key.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model, input: 'a' }) });
    expect((await post('nope')).status).toBe(404);
    expect((await post('m1')).status).toBe(402);
  });
});

/** The gateway through the official openai client on a real listener, with a fake upstream. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect } from 'node:net';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { sql } from 'drizzle-orm';
import { startFakeUpstream, type FakeUpstream } from '../../support/fake-upstream';
import { fundedUser, type Harness, startHarness, waitFor } from './gateway-harness';

// 1000 per million tokens = 1000 micro-units per token: 10 prompt + 5 completion tokens cost 15000.
const PRICE = 1000;
const PER_TOKEN = 1000n;

let h: Harness;
let dead: string;
let m2: FakeUpstream;

beforeAll(async () => {
  const closed = await startFakeUpstream();
  dead = closed.url;
  await closed.close();
  m2 = await startFakeUpstream({ models: ['m2'] });
  const up = await startFakeUpstream({ models: ['m1'] });
  h = await startHarness({
    upstream: up,
    backends: `m1=${dead},m1=${up.url},unpriced=${up.url},broken=${m2.url},down=${dead}`,
    env: { ROUTES: 'auto=fallback:down|m1;cheap=cheapest:broken|m1', GATEWAY_MAX_BODY: '2048' },
  });
  await h.t.services.pricing.setModelPrices([
    { slug: 'm1', unit: 'per_million_tokens', price: PRICE },
    { slug: 'broken', unit: 'per_million_tokens', price: 1 },
    { slug: 'down', unit: 'per_request', price: 0.5 },
  ]);
});
afterAll(async () => {
  await h.close();
  await h.up.close();
  await m2.close();
});

const usageRows = (userId: string) =>
  h.t.ctx.database.query<Record<string, any>>(sql`select * from router_usage where user_id = ${userId} order by created_at, id`);

describe('gateway: metering through the openai client', () => {
  test('JSON completion: fields pass through, usage.cost, X-Cost, exact debit, one usage row', async () => {
    h.up.reset();
    // Enough for the request's whole bound (no max_tokens: 4096 completion tokens), so it goes upstream as sent.
    const u = await fundedUser(h, 10_000_000n);
    const { data, response } = await u.client.chat.completions
      .create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], temperature: 0.3, top_p: 0.9, user: 'end-user-7', seed: 42 })
      .withResponse();
    expect(data.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    expect(data.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, cost: 0.015 });
    expect(response.headers.get('x-cost')).toBe('0.015000');
    expect(response.headers.get('x-request-id')).toBeTruthy();
    const sent = h.up.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body!;
    expect(sent).toEqual({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], temperature: 0.3, top_p: 0.9, user: 'end-user-7', seed: 42 });
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(10_000_000n - 15n * PER_TOKEN);
    const [row] = await usageRows(u.user.id);
    expect(row).toMatchObject({ key_id: u.key.id, entrypoint: 'm1', model: 'm1', prompt_tokens: 10, completion_tokens: 5, status: 200, streamed: false, aborted: false, tokens_counted: false, clamped: false });
    expect(BigInt(row!.cost_micros)).toBe(15n * PER_TOKEN);
    expect(BigInt(row!.cost_usd_micros)).toBe(15n * PER_TOKEN);
  });

  test('a wallet below the bound: the request is sent the completion allowance what is left affords, and billed within it', async () => {
    h.up.reset();
    const lastSent = () => h.up.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body!;
    // 1.00 buys 1000 tokens; the prompt is bounded by the body's bytes and 64 template tokens.
    const allowanceOf = (body: object) => 1000 - (JSON.stringify(body).length + 64);
    const plain = { model: 'm1', messages: [{ role: 'user' as const, content: 'hi' }] };
    await (await fundedUser(h, 1_000_000n)).client.chat.completions.create(plain);
    expect(lastSent().max_tokens).toBe(allowanceOf(plain));
    // A larger maximum of the caller's is lowered in the field it used; a smaller one is sent as it is.
    const larger = { ...plain, max_completion_tokens: 100_000 };
    await (await fundedUser(h, 1_000_000n)).client.chat.completions.create(larger);
    expect(lastSent()).toMatchObject({ max_completion_tokens: allowanceOf(larger) });
    expect(lastSent().max_tokens).toBeUndefined();
    await (await fundedUser(h, 1_000_000n)).client.chat.completions.create({ ...plain, max_tokens: 7 });
    expect(lastSent().max_tokens).toBe(7);
    // An upstream that reports more than the allowance is billed at the allowance: the wallet ends at zero.
    h.up.set({ completionTokens: 100_000 });
    const u = await fundedUser(h, 1_000_000n);
    const r = await u.client.chat.completions.create(plain);
    expect(r.usage).toMatchObject({ completion_tokens: 100_000, cost: (10 + allowanceOf(plain)) / 1000 });
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - BigInt(10 + allowanceOf(plain)) * PER_TOKEN);
    expect((await usageRows(u.user.id))[0]).toMatchObject({ completion_tokens: 100_000, clamped: true });
    h.up.reset();
  });

  test('N parallel requests by one user are N `usage` transactions, each the cost of its request', async () => {
    // Request i reports i + 1 prompt tokens, so every request has its own cost.
    h.up.set((body) => ({ promptTokens: Number(String(body.messages[0].content).slice(1)) + 1 }));
    const u = await fundedUser(h, 1_000_000_000n);
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: `n${i}` }] }).withResponse()),
    );
    await h.t.services.router.flushUsage();
    h.up.reset();
    const xCosts = answers.map((a) => a.response.headers.get('x-cost')!).sort();
    expect(new Set(xCosts).size).toBe(12);
    const listed = await h.t.request('GET', '/api/billing/transactions?limit=200', { token: u.user.token });
    const usage = (listed.body as { transactions: Array<{ type: string; amount: number; description: string }> }).transactions.filter((x) => x.type === 'usage');
    expect(usage.map((x) => (-x.amount).toFixed(6)).sort()).toEqual(xCosts);
    expect(usage.map((x) => x.description).sort()).toEqual(answers.map((_, i) => `m1 via m1: ${i + 1}+5 tokens`).sort());
    // Each usage row has its own ledger entry (reference usage:<row id>) of exactly its cost.
    const pairs = await h.t.ctx.database.query<{ cost: string; amount: string | null }>(
      sql`select r.cost_micros::text as cost, t.amount_micros::text as amount
          from router_usage r left join wallet_transactions t on t.reference = 'usage:' || r.id where r.user_id = ${u.user.id}`,
    );
    expect(pairs.length).toBe(12);
    for (const p of pairs) expect(BigInt(p.amount!)).toBe(-BigInt(p.cost));
    const [sum] = await h.t.ctx.database.query<{ s: string }>(sql`select sum(amount_micros)::text as s from wallet_transactions where user_id = ${u.user.id}`);
    expect(await u.balance()).toBe(BigInt(sum!.s));
    expect(await u.balance()).toBe(1_000_000_000n - pairs.reduce((s, p) => s + BigInt(p.cost), 0n));
  });

  test('stream: include_usage forced upstream, usage and cost in the final chunk, exact debit', async () => {
    h.up.reset();
    h.up.set({ content: 'one two three four' });
    const u = await fundedUser(h, 1_000_000n);
    const { data: stream, response } = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect(response.headers.get('x-cost-final')).toBe('false');
    // Provisional: the prompt counted here (chat accounting) and the first chunk's tokens.
    const known = 3 + 3 + countTokens('hi') + countTokens('one ');
    expect(response.headers.get('x-cost')).toBe((known / 1000).toFixed(6));
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('one two three four');
    const last = chunks.at(-1)! as any;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 10, completion_tokens: 4, total_tokens: 14, cost: 0.014 });
    expect(h.up.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body!.stream_options).toEqual({ include_usage: true });
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - 14n * PER_TOKEN);
    expect((await usageRows(u.user.id))[0]).toMatchObject({ streamed: true, aborted: false, status: 200, completion_tokens: 4 });
    h.up.reset();
  });

  test('no upstream usage: tokens are counted (o200k, chat accounting), JSON and stream', async () => {
    h.up.set({ usage: false, content: 'counted words here' });
    const u = await fundedUser(h, 1_000_000n);
    const messages = [{ role: 'user' as const, content: 'how many tokens is this?' }];
    const prompt = 3 + 3 + countTokens('how many tokens is this?');
    const completion = countTokens('counted words here');
    const r = await u.client.chat.completions.create({ model: 'm1', messages });
    expect(r.usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: completion });
    const chunks = [];
    for await (const c of await u.client.chat.completions.create({ model: 'm1', messages, stream: true })) chunks.push(c);
    expect((chunks.at(-1) as any).usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: completion });
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - 2n * BigInt(prompt + completion) * PER_TOKEN);
    expect((await usageRows(u.user.id)).every((row) => row.tokens_counted)).toBe(true);
    h.up.reset();
  });

  test('stream of a per-request model: X-Cost is the price, and with no upstream usage the prompt is still counted', async () => {
    const prices = h.t.services.pricing.catalog();
    await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.002 }]);
    h.up.set({ usage: false, content: 'two words' });
    try {
      const u = await fundedUser(h, 1_000_000n);
      const messages = [{ role: 'user' as const, content: 'count me, please' }];
      const { data, response } = await u.client.chat.completions.create({ model: 'm1', messages, stream: true }).withResponse();
      expect(response.headers.get('x-cost')).toBe('0.002000');
      const chunks = [];
      for await (const c of data) chunks.push(c);
      const prompt = 3 + 3 + countTokens('count me, please');
      const completion = countTokens('two words');
      expect((chunks.at(-1) as any).usage).toEqual({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, cost: 0.002 });
      await h.t.services.router.flushUsage();
      expect(await u.balance()).toBe(1_000_000n - 2000n);
      expect(await usageRows(u.user.id)).toMatchObject([{ prompt_tokens: prompt, completion_tokens: completion, tokens_counted: true }]);
    } finally {
      await h.t.services.pricing.setModelPrices(prices.models.map((m) => ({ slug: m.slug, unit: m.unit, price: Number(m.price) })));
      h.up.reset();
    }
  });

  test('tool calls pass through, JSON and stream', async () => {
    h.up.set({ toolCalls: [{ id: 'call_1', name: 'lookup', arguments: '{"q":"x"}' }] });
    const u = await fundedUser(h, 1_000_000n);
    const tools = [{ type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }];
    const r = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'x' }], tools });
    expect(r.choices[0]!.message.tool_calls![0]).toMatchObject({ id: 'call_1', function: { name: 'lookup', arguments: '{"q":"x"}' } });
    expect(h.up.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body!.tools).toEqual(tools);
    const chunks = [];
    for await (const c of await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'x' }], tools, stream: true })) chunks.push(c);
    expect(chunks.some((c) => c.choices[0]?.delta.tool_calls?.[0]?.function?.name === 'lookup')).toBe(true);
    expect(chunks.some((c) => c.choices[0]?.finish_reason === 'tool_calls')).toBe(true);
    h.up.reset();
  });

  test('routes: fallback skips a dead model, cheapest orders by estimated cost; usage keeps entrypoint and model', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const r = await u.client.chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.model).toBe('m1');
    await u.client.chat.completions.create({ model: 'cheap', messages: [{ role: 'user', content: 'hi' }] });
    expect(m2.requests.filter((x) => x.path === '/v1/chat/completions').at(-1)!.body!.model).toBe('broken');
    await h.t.services.router.flushUsage();
    const rows = await usageRows(u.user.id);
    expect(rows.map((x) => [x.entrypoint, x.model])).toEqual([
      ['auto', 'm1'],
      ['cheap', 'broken'],
    ]);
    // broken costs 1 per million tokens, i.e. one micro-unit per token.
    expect(await u.balance()).toBe(1_000_000n - 15n * PER_TOKEN - 15n);
  });

  test('failover: a dead backend of m1 is tried, marked down, and the live one answers; health is listed', async () => {
    const u = await fundedUser(h, 1_000_000n);
    for (let i = 0; i < 3; i++) {
      const r = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
      expect(r.choices[0]!.message.content).toBe('Hello from the fake upstream.');
      const chunks = [];
      for await (const c of await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true })) chunks.push(c);
      expect((chunks.at(-1) as any).usage.cost).toBe(0.015);
    }
    const deadBackend = h.t.services.router.listBackends().find((b) => b.model === 'm1' && b.url === dead)!;
    expect(deadBackend.healthy).toBe(false);
    expect(deadBackend.last_error).toBeTruthy();
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - 6n * 15n * PER_TOKEN);
  });

  test('GET /v1/models lists priced models with a backend and the routes', async () => {
    const u = await fundedUser(h, 0n);
    const ids = (await u.client.models.list()).data.map((m) => m.id);
    expect(ids).toEqual(['broken', 'down', 'm1', 'auto', 'cheap']);
  });
});

describe('gateway: bad input answers {error}, never charges, never 500', () => {
  const post = (key: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${h.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body });

  test('each refusal has its status', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const msg = [{ role: 'user', content: 'hi' }];
    const cases: Array<[string, string, number]> = [
      ['not JSON', '{"model": "m1", messages', 400],
      ['messages missing', JSON.stringify({ model: 'm1' }), 400],
      ['messages empty', JSON.stringify({ model: 'm1', messages: [] }), 400],
      ['model missing', JSON.stringify({ messages: msg }), 400],
      ['array body', '[]', 400],
      ['unknown model', JSON.stringify({ model: 'nope', messages: msg }), 404],
      ['unpriced model', JSON.stringify({ model: 'unpriced', messages: msg }), 404],
      ['upstream down', JSON.stringify({ model: 'down', messages: msg }), 503],
      ['too large', JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'x'.repeat(4000) }] }), 413],
    ];
    for (const [what, body, status] of cases) {
      const res = await post(u.key.key, body);
      expect({ what, status: res.status }).toEqual({ what, status });
      expect(res.headers.get('content-type')).toContain('application/json');
      expect(res.headers.get('x-cost')).toBe('0.000000');
      expect(typeof ((await res.json()) as { error: unknown }).error).toBe('string');
    }
    h.up.set({ garbage: true });
    for (const stream of [false, true]) {
      const res = await post(u.key.key, JSON.stringify({ model: 'm1', messages: msg, stream }));
      expect(res.status).toBe(502);
      expect(typeof ((await res.json()) as { error: unknown }).error).toBe('string');
    }
    h.up.reset();
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n);
  });

  test('credentials: no key, a session token, a revoked-looking key are 401; zero balance is 402', async () => {
    const u = await fundedUser(h, 0n);
    const body = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
    const anonymous = await fetch(`${h.baseUrl}/v1/chat/completions`, { method: 'POST', body });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('x-cost')).toBe('0.000000');
    expect((await post(u.user.token, body)).status).toBe(401);
    expect((await post('bfvk-0000000000000000000000000000000000000000', body)).status).toBe(401);
    const res = await post(u.key.key, body);
    expect(res.status).toBe(402);
    expect(res.headers.get('x-cost')).toBe('0.000000');
    expect(typeof ((await res.json()) as { error: unknown }).error).toBe('string');
    // No completion reached the upstream; the router's health probe (GET /v1/models every 10 s) may have.
    expect(h.up.requests.filter((r) => r.method === 'POST')).toEqual([]);
  });

  test('an upstream 5xx fails over, then 502 when every backend fails', async () => {
    const u = await fundedUser(h, 1_000_000n);
    h.up.set({ status: 500 });
    const res = await post(u.key.key, JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }));
    expect(res.status).toBe(502);
    h.up.reset();
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n);
    const [row] = await usageRows(u.user.id);
    expect(row).toMatchObject({ status: 502, prompt_tokens: 0, completion_tokens: 0 });
    expect(BigInt(row!.cost_micros)).toBe(0n);
  });
});

describe('gateway: concurrency and aborts', () => {
  test('50 parallel requests against a balance covering 10: exactly 10 served, the rest 402, balance exactly 0', async () => {
    const u = await fundedUser(h, 10n * 15n * PER_TOKEN);
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }).then(
          () => 200,
          (e) => e.status as number,
        ),
      ),
    );
    expect(results.filter((s) => s === 200).length).toBe(10);
    expect(results.filter((s) => s === 402).length).toBe(40);
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(0n);
  });

  test('a client abort mid-stream bills the delivered tokens only and aborts the upstream', async () => {
    h.up.reset();
    // The upstream pauses after a few frames until the client has gone: no race with its speed.
    const gate = Promise.withResolvers<void>();
    h.up.set({ content: 'w '.repeat(200), hold: { afterFrames: 5, until: gate.promise } });
    const u = await fundedUser(h, 10_000_000n);
    const stream = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true });
    let seen = 0;
    for await (const c of stream) {
      if (c.choices[0]?.delta.content) seen++;
      if (seen === 3) break; // the client stops reading: the SDK aborts the request
    }
    await waitFor(() => h.up.stats.streamsAborted === 1, 'the upstream stream to be aborted');
    await waitFor(async () => {
      await h.t.services.router.flushUsage();
      return (await usageRows(u.user.id)).length === 1;
    }, 'the usage row');
    const [row] = await usageRows(u.user.id);
    expect(row).toMatchObject({ aborted: true, streamed: true, status: 499, tokens_counted: true });
    expect(row!.completion_tokens).toBeGreaterThanOrEqual(3);
    expect(row!.completion_tokens).toBeLessThan(200);
    const cost = BigInt(row!.prompt_tokens + row!.completion_tokens) * PER_TOKEN;
    expect(BigInt(row!.cost_micros)).toBe(cost);
    expect(await u.balance()).toBe(10_000_000n - cost);
    gate.resolve();
    h.up.reset();
  });

  test('a JSON request whose client disconnects aborts the upstream request and costs nothing', async () => {
    h.up.reset();
    const gate = Promise.withResolvers<void>(); // never opened: the upstream answers only once the client is gone
    h.up.set({ hold: { afterFrames: 0, until: gate.promise } });
    const u = await fundedUser(h, 1_000_000n);
    const ac = new AbortController();
    const pending = u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }, { signal: ac.signal }).then(
      () => 'answered',
      () => 'aborted',
    );
    await waitFor(() => h.up.stats.completions >= 1, 'the upstream to receive the request');
    ac.abort();
    expect(await pending).toBe('aborted');
    await waitFor(() => h.up.stats.requestsAborted === 1, 'the upstream request to be aborted');
    await waitFor(async () => {
      await h.t.services.router.flushUsage();
      return (await usageRows(u.user.id)).length === 1;
    }, 'the usage row');
    expect((await usageRows(u.user.id))[0]).toMatchObject({ status: 499, aborted: true, streamed: false });
    expect(await u.balance()).toBe(1_000_000n);
    h.up.reset();
  });

  test('a client that leaves while sending its body is logged as 499, with no error line, and nothing reaches the upstream', async () => {
    h.up.reset();
    const u = await fundedUser(h, 1_000_000n);
    const before = h.t.logs.length;
    const port = Number(new URL(h.baseUrl).port);
    // The head declares 200 bytes; 19 are sent, and once the server is reading the body the
    // connection is dropped.
    const socket = connect(port, '127.0.0.1', () =>
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${u.key.key}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"model":"m1","mess`,
      ),
    );
    await waitFor(() => h.t.app.server!.pendingRequests, 'the server to take the request', { until: (n) => n > 0 });
    socket.destroy();
    await waitFor(() => h.t.logs.slice(before).some((l) => l.includes('"path":"/v1/chat/completions"')), 'the request to be logged');
    const lines = h.t.logs.slice(before).map((l) => JSON.parse(l) as { level: string; msg: string; path?: string; status?: number });
    expect(lines.filter((l) => l.path === '/v1/chat/completions').map((l) => l.status)).toEqual([499]);
    expect(lines.filter((l) => l.level === 'error')).toEqual([]);
    expect(h.up.stats.completions).toBe(0);
    expect(await u.balance()).toBe(1_000_000n);
  });

  test('an abort before the first token costs nothing', async () => {
    h.up.reset();
    const gate = Promise.withResolvers<void>(); // never opened: the upstream answers only once the client is gone
    h.up.set({ hold: { afterFrames: 0, until: gate.promise } });
    const u = await fundedUser(h, 1_000_000n);
    const ac = new AbortController();
    const pending = u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true }, { signal: ac.signal }).then(
      () => 'answered',
      () => 'aborted',
    );
    await waitFor(() => h.up.stats.completions >= 1, 'the upstream to receive the request');
    ac.abort();
    expect(await pending).toBe('aborted');
    await waitFor(async () => {
      await h.t.services.router.flushUsage();
      return (await usageRows(u.user.id)).length === 1;
    }, 'the usage row');
    const [row] = await usageRows(u.user.id);
    expect(row).toMatchObject({ status: 499, aborted: true });
    expect(BigInt(row!.cost_micros)).toBe(0n);
    expect(await u.balance()).toBe(1_000_000n);
    h.up.reset();
  });
});

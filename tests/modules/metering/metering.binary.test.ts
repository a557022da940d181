/**
 * What a request is billed for, and what is blamed on a backend, on `dist/cpd`: every kind of
 * generated text counts (reasoning, refusals, legacy function calls), also when a client leaves
 * mid-reasoning; reported usage past the request's maximum is clamped (and marked); a body the
 * server cannot handle is the client's 400, and no refusal caused by the request marks a backend down.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createParser } from 'eventsource-parser';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import type { RunningBinary } from '../../support/binary';
import { scrape } from '../../support/prometheus';
import { waitFor } from '../../support/wait';
import { MICROS_PER_TOKEN, type WalletBed, startWalletBed } from '../../support/wallet-binary';

let bed: WalletBed;
let node: RunningBinary;

beforeAll(async () => {
  // A backend that sends nothing for 2 s is failed over: reasoning must count as something sent.
  bed = await startWalletBed({ replicas: 1, env: { ROUTER_FIRST_BYTE_TIMEOUT: '2s' } });
  node = bed.nodes[0]!;
}, 120_000);
afterAll(() => bed?.close());
afterEach(() => bed.up.reset());

const HI = { model: 'm1', messages: [{ role: 'user', content: 'hi' }] };

const usageRows = (userId: string) =>
  bed.db.database.query<{ id: string; status: number; prompt_tokens: number; completion_tokens: number; cost: string }>(
    sql`select id, status, prompt_tokens, completion_tokens, cost_micros::text as cost from router_usage where user_id = ${userId} order by created_at`,
  );

/** Opens a stream and hands each parsed chunk to `onChunk` until it returns true (then the client leaves) or the stream ends. */
async function streamUntil(key: string, body: unknown, onChunk: (chunk: any) => boolean) {
  const ac = new AbortController();
  const res = await fetch(`${node.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: ac.signal,
  });
  const chunks: any[] = [];
  let stop = false;
  const parser = createParser({
    onEvent: (e) => {
      if (stop || e.data === '[DONE]') return;
      chunks.push(JSON.parse(e.data));
      stop = onChunk(chunks.at(-1));
    },
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.feed(decoder.decode(value, { stream: true }));
    if (stop) {
      ac.abort();
      break;
    }
  }
  return { res, chunks };
}

describe('every kind of generated text is billed', () => {
  test('a client that leaves at the first content chunk after 300 reasoning chunks is billed for the reasoning', async () => {
    // The upstream then holds (as a model still generating would) until the client has gone.
    const gate = Promise.withResolvers<void>();
    bed.up.set({ reasoning: 'think '.repeat(300), content: 'the answer is here', hold: { afterFrames: 301, until: gate.promise } });
    const { userId, key } = await bed.fundedKey(10_000_000n);
    const { res, chunks } = await streamUntil(key, { ...HI, stream: true }, (c) => typeof c.choices?.[0]?.delta?.content === 'string' && c.choices[0].delta.content !== '');
    expect(res.status).toBe(200);
    expect(chunks.filter((c) => c.choices?.[0]?.delta?.reasoning_content)).toHaveLength(300);
    const [row] = await waitFor(() => usageRows(userId), 'the aborted stream committed', { until: (rows) => rows.length === 1 });
    expect(row!.status).toBe(499);
    // Counted: 300 reasoning tokens (and perhaps the first content piece) were delivered.
    expect(row!.completion_tokens).toBeGreaterThanOrEqual(300);
    expect(BigInt(row!.cost)).toBe(BigInt(row!.prompt_tokens + row!.completion_tokens) * MICROS_PER_TOKEN);
    gate.resolve();
  }, 30_000);

  test('a client that leaves mid-reasoning, before any content, is billed for the reasoning it got', async () => {
    const gate = Promise.withResolvers<void>();
    bed.up.set({ reasoning: 'think '.repeat(300), content: 'the answer', hold: { afterFrames: 100, until: gate.promise } });
    const { userId, key } = await bed.fundedKey(10_000_000n);
    // The client leaves once it has the 100 chunks the upstream sent before holding.
    let seen = 0;
    const { chunks } = await streamUntil(key, { ...HI, stream: true }, () => ++seen === 100);
    expect(chunks.every((c) => c.choices[0].delta.reasoning_content === 'think ')).toBe(true);
    const [row] = await waitFor(() => usageRows(userId), 'the aborted stream committed', { until: (rows) => rows.length === 1 });
    expect(row!.status).toBe(499);
    expect(row!.completion_tokens).toBeGreaterThanOrEqual(100);
    expect(BigInt(row!.cost)).toBe(BigInt(row!.prompt_tokens + row!.completion_tokens) * MICROS_PER_TOKEN);
    gate.resolve();
  }, 30_000);

  test('reasoning is output: the headers and the first reasoning chunk leave while the model still thinks, priced like content', async () => {
    const { key } = await bed.fundedKey(10_000_000n);
    const open = () =>
      fetch(`${node.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...HI, stream: true }),
      });
    // The upstream holds after its first reasoning chunk until the client has it: longer than ROUTER_FIRST_BYTE_TIMEOUT would allow for silence.
    const gate = Promise.withResolvers<void>();
    bed.up.set({ reasoning: 'think hard', content: 'done', hold: { afterFrames: 1, until: gate.promise } });
    const res = await open();
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"reasoning_content":"think "');
    gate.resolve();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toContain('data: [DONE]');
    // The provisional X-Cost counts a first reasoning piece as it counts the same first content piece.
    bed.up.set({ reasoning: '', content: 'think done', hold: null });
    const plain = await open();
    await plain.text();
    expect(res.headers.get('x-cost-final')).toBe('false');
    expect(res.headers.get('x-cost')).toBe(plain.headers.get('x-cost')!);
  }, 30_000);

  const REFUSAL = 'I cannot help with that request.';
  const CALL = { name: 'lookup_weather', arguments: '{"city":"Paris","unit":"celsius"}' };
  const THOUGHT = 'the user greets me, so I greet back';

  for (const stream of [false, true]) {
    test(`without upstream usage (${stream ? 'stream' : 'JSON'}): refusals, legacy function calls and reasoning are counted`, async () => {
      const { key } = await bed.fundedKey(10_000_000n);
      const completionOf = async (behaviour: Parameters<WalletBed['up']['set']>[0]) => {
        bed.up.set({ usage: false, ...behaviour });
        const r = await bed.chat(node, key, { ...HI, stream });
        expect(r.status).toBe(200);
        return r.usage.completion_tokens as number;
      };
      expect(await completionOf({ refusal: REFUSAL })).toBe(countTokens(REFUSAL));
      // A call's name and arguments count as one text, as tool calls do.
      expect(await completionOf({ refusal: null, functionCall: CALL })).toBe(countTokens(CALL.name + CALL.arguments));
      for (const reasoningField of ['reasoning_content', 'reasoning'] as const)
        expect(await completionOf({ functionCall: null, reasoning: THOUGHT, reasoningField, content: 'hello' })).toBe(countTokens(THOUGHT) + countTokens('hello'));
    }, 30_000);
  }
});

describe('reported usage past the request maximum is clamped', () => {
  test('max_tokens 5, the upstream reports 100 000 completion tokens: billed 5 (JSON) and 2 × 5 (n=2 stream); the row keeps the figure, marked', async () => {
    bed.up.set({ completionTokens: 100_000 });
    const { userId, key } = await bed.fundedKey(50_000_000n);
    const json = await bed.chat(node, key, { ...HI, max_tokens: 5 });
    expect(json.status).toBe(200);
    expect(json.headers.get('x-cost')).toBe('0.015000');
    const stream = await bed.chat(node, key, { ...HI, n: 2, max_completion_tokens: 5, stream: true });
    expect(stream.done).toBe(true);
    expect(stream.usage.cost).toBe(0.02);
    // No maximum set: the reported figure is billed as it is.
    bed.up.set({ completionTokens: 1000 });
    expect((await bed.chat(node, key, HI)).usage.cost).toBe(1.01);
    expect(await bed.balanceOf(userId)).toBe(50_000_000n - 15_000n - 20_000n - 1_010_000n);
    const rows = await bed.db.database.query<{ id: string; completion_tokens: number; clamped: boolean; cost: string }>(
      sql`select id, completion_tokens, clamped, cost_micros::text as cost from router_usage where user_id = ${userId} order by created_at`,
    );
    expect(rows.map((r) => [r.completion_tokens, r.clamped, r.cost])).toEqual([
      [100_000, true, '15000'],
      [100_000, true, '20000'],
      [1000, false, '1010000'],
    ]);
    const log = (await fetch(`${node.url}/api/usage`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json())) as { usage: Array<{ clamped: boolean }> };
    expect(log.usage.map((u) => u.clamped)).toEqual([false, true, true]);
    const csv = (await fetch(`${node.url}/api/usage/export.csv`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.text())).trim().split('\r\n');
    const clampedAt = csv[0]!.split(',').indexOf('clamped');
    expect(clampedAt).toBeGreaterThan(-1);
    expect(csv.slice(1).map((line) => line.split(',')[clampedAt])).toEqual(['false', 'true', 'true']);
    const warnings = node.logs().split('\n').filter((l) => l.includes('completion tokens clamped'));
    expect(warnings.map((l) => JSON.parse(l).usage_id).sort()).toEqual([rows[0]!.id, rows[1]!.id].sort());
    await bed.expectBooksBalanced();
  }, 30_000);
});

describe("the client's own request is never a backend failure", () => {
  const backendUp = async () => (await scrape(`${node.url}/metrics`)).value('cpd_router_backend_up', { model: 'm1' });
  const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
  /** A request body whose deepest value is `depth` levels down (the body itself is level 1). */
  const bodyOfDepth = (depth: number, base: Record<string, unknown> = HI) => `${JSON.stringify(base).slice(0, -1)},"metadata_x":${nested(depth - 1)}}`;

  test('a body 200 000 levels deep is 400 on chat, embeddings and Responses; the upstream never hears of it and stays up', async () => {
    const { key } = await bed.fundedKey(10_000_000n);
    const deep = bodyOfDepth(200_000);
    expect(deep.length).toBeGreaterThan(400_000);
    // Completions and embeddings only: the router's health probe (GET /v1/models every 10 s) may come meanwhile.
    const posted = () => bed.up.requests.filter((r) => r.method === 'POST').length;
    const before = posted();
    for (let i = 0; i < 6; i++) {
      const r = await bed.chat(node, key, deep);
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ error: 'the request body is nested more than 64 levels deep' });
    }
    for (const [path, base] of [
      ['/v1/embeddings', { model: 'm1', input: 'hi' }],
      ['/v1/responses', { model: 'm1', input: 'hi' }],
    ] as const) {
      const r = await bed.chat(node, key, bodyOfDepth(200_000, base), path);
      expect([r.status, r.body]).toEqual([400, { error: 'the request body is nested more than 64 levels deep' }]);
    }
    expect(posted()).toBe(before);
    expect(await backendUp()).toBe(1);
    expect((await bed.chat(node, key, HI)).status).toBe(200);
  }, 30_000);

  test('64 levels are served, 65 are not; brackets inside strings are text', async () => {
    const { key } = await bed.fundedKey(10_000_000n);
    expect((await bed.chat(node, key, bodyOfDepth(64))).status).toBe(200);
    expect((await bed.chat(node, key, bodyOfDepth(65))).status).toBe(400);
    expect((await bed.chat(node, key, { model: 'm1', messages: [{ role: 'user', content: '[{'.repeat(5000) }] })).status).toBe(200);
  }, 30_000);

  test('upstream refusals of the request (400, 402, 403, 404, 413, 422, context length) leave the backend up', async () => {
    const { key } = await bed.fundedKey(10_000_000n);
    const cases: Array<[status: number, message: string | null, answered: number]> = [
      [400, null, 400],
      [402, null, 502],
      [403, null, 502],
      [404, null, 502],
      [413, null, 413],
      [422, null, 400],
      [500, "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens.", 400],
    ];
    for (const [status, errorMessage, answered] of cases) {
      bed.up.set({ status, errorMessage });
      for (const stream of [false, true]) {
        const r = await bed.chat(node, key, { ...HI, stream });
        expect([status, stream, r.status]).toEqual([status, stream, answered]);
        expect(typeof r.body.error).toBe('string');
      }
      expect([status, await backendUp()]).toEqual([status, 1]);
    }
    // A real failure still counts.
    bed.up.set({ status: 503, errorMessage: null });
    expect((await bed.chat(node, key, HI)).status).toBe(502);
    expect(await backendUp()).toBe(0);
  }, 30_000);
});

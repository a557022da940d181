/**
 * Market pricing on two `dist/cpd` processes sharing one PostgreSQL database (docs/billing.md): a
 * fake upstream reports cached and reasoning tokens; every figure of every metered path (X-Cost,
 * the usage chunk's or answer's cost, the usage row, its ledger entry, GET /api/usage, the CSV and
 * the cost report) equals the formula, with the caller's price group applied; a redemption code
 * credits once under 100 concurrent attempts on both processes, every refusal answers the same,
 * and the failures' throttle holds across them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { waitFor } from '../../support/wait';
import { type WalletBed, startWalletBed } from '../../support/wallet-binary';

/** Per million tokens: input 2.5, output 10, cached input 1.25 (micro-units per token: 2.5, 10, 1.25); group ×1.2345. */
const PRICE = { input: 2.5, output: 10, cached: 1.25 };
const MULTIPLIER = 1.2345;

/** The formula of docs/billing.md, in micro-units: exact, rounded half up once. */
function expected(prompt: number, cached: number, completion: number): bigint {
  const perMillion = (prompt - cached) * PRICE.input * 1e6 + cached * PRICE.cached * 1e6 + completion * PRICE.output * 1e6;
  // Exact in integers: prices in micro-units, the multiplier in ten-thousandths.
  const sum = BigInt(Math.round(perMillion)) * BigInt(Math.round(MULTIPLIER * 10_000));
  return (sum + 5_000_000_000n) / 10_000_000_000n;
}
const major = (micros: bigint) => Number(micros) / 1e6;

describe('market pricing on the binary', () => {
  let bed: WalletBed;
  let caller: { userId: string; keyId: string; key: string };
  const sessions: string[] = [];
  let batch: { codes: string[] } = { codes: [] };
  /** A capturing key of the same caller, for the replay. */
  let capturing = '';

  beforeAll(async () => {
    bed = await startWalletBed({ replicas: 2 });
    caller = await bed.fundedKey(100_000_000n);
    const tc = await createTestContext('postgres', {}, { testDb: bed.db });
    try {
      const { services } = await buildApp(tc.ctx);
      await services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 3, input_price: PRICE.input, output_price: PRICE.output, cached_input_price: PRICE.cached }]);
      await services.pricing.groups.replace([{ name: 'resellers', multiplier: MULTIPLIER }]);
      await services.pricing.groups.assign(caller.userId, 'resellers');
      for (let i = 0; i < 10; i++) {
        const u = await services.accounts.createUser({ email: `redeemer${i}@example.com`, password: 'binary-password' });
        sessions.push((await services.accounts.createSession(u.id)).token);
      }
      batch = await services.billing.redemption.createBatch({ count: 1, amount: 12.5 });
      capturing = (await services.accounts.createApiKey(caller.userId, { name: 'captured', capture: true })).key;
    } finally {
      await tc.close();
    }
    // Both processes hear the prices and the group (NOTIFY) before the requests.
    for (const node of bed.nodes)
      await waitFor(async () => (await (await fetch(`${node.url}/api/billing/prices`, { headers: { authorization: `Bearer ${caller.key}` } })).json()) as any, 'prices', {
        until: (p) => p.group === 'resellers' && p.models[0]?.cached_input_price === 1.543125,
      });
  }, 120_000);
  afterAll(() => bed?.close());

  test('every metered path bills the formula, and every figure of a request agrees', async () => {
    bed.up.set({ promptTokens: 1000, cachedTokens: 400, reasoning: 'think it through ', content: 'one two three four five' });
    const messages = [{ role: 'user', content: 'hello' }];
    const asked = [
      { path: '/v1/chat/completions', body: { model: 'm1', messages }, prompt: 1000, cached: 400, completion: 8 },
      { path: '/v1/chat/completions', body: { model: 'm1', messages, stream: true }, prompt: 1000, cached: 400, completion: 8 },
      { path: '/v1/responses', body: { model: 'm1', input: 'hello' }, prompt: 1000, cached: 400, completion: 8 },
      { path: '/v1/embeddings', body: { model: 'm1', input: 'a b c d' }, prompt: 4, cached: 0, completion: 0 },
    ];
    const costs: bigint[] = [];
    for (const [i, a] of asked.entries()) {
      const node = bed.nodes[i % 2]!;
      const answer = await bed.chat(node, caller.key, a.body, a.path);
      expect(answer.status).toBe(200);
      const cost = expected(a.prompt, a.cached, a.completion);
      costs.push(cost);
      expect([a.path, answer.usage.cost]).toEqual([a.path, major(cost)]);
      // A stream's X-Cost is sent with its first token (provisional); every JSON answer's is the bill.
      if (!a.body.stream) expect(answer.headers.get('x-cost')).toBe(major(cost).toFixed(6));
    }
    // Anthropic's name for the cached tokens is read too.
    bed.up.set({ cachedField: 'cache_read_input_tokens', cachedTokens: 999 });
    const anthropic = await bed.chat(bed.nodes[1]!, caller.key, { model: 'm1', messages });
    costs.push(expected(1000, 999, 8));
    expect(anthropic.usage.cost).toBe(major(costs.at(-1)!));

    const rows = await bed.db.database.query<{ id: string; prompt_tokens: number; cached_tokens: number; completion_tokens: number; reasoning_tokens: number; cost: string; ledger: string }>(sql`
      select u.id, u.prompt_tokens, u.cached_tokens, u.completion_tokens, u.reasoning_tokens, u.cost_micros::text as cost, (-t.amount_micros)::text as ledger
      from router_usage u join wallet_transactions t on t.reference = 'usage:' || u.id
      where u.key_id = ${caller.keyId} order by u.created_at, u.id`);
    expect(rows.map((r) => [r.prompt_tokens, r.cached_tokens, r.completion_tokens, r.reasoning_tokens, BigInt(r.cost), BigInt(r.ledger)])).toEqual([
      [1000, 400, 8, 3, costs[0]!, costs[0]!],
      [1000, 400, 8, 3, costs[1]!, costs[1]!],
      [1000, 400, 8, 3, costs[2]!, costs[2]!],
      [4, 0, 0, 0, costs[3]!, costs[3]!],
      [1000, 999, 8, 3, costs[4]!, costs[4]!],
    ]);
    const total = costs.reduce((a, b) => a + b, 0n);
    expect(await bed.balanceOf(caller.userId)).toBe(100_000_000n - total);

    const auth = { headers: { authorization: `Bearer ${caller.key}` } };
    const log = (await (await fetch(`${bed.nodes[0]!.url}/api/usage?limit=10`, auth)).json()) as any;
    expect(log.usage.map((u: any) => [u.cached_tokens, u.reasoning_tokens, u.cost]).reverse()).toEqual(rows.map((r) => [r.cached_tokens, r.reasoning_tokens, major(BigInt(r.cost))]));
    const csv = (await (await fetch(`${bed.nodes[1]!.url}/api/usage/export.csv`, auth)).text()).trim().split('\r\n');
    const header = csv[0]!.split(',');
    const cells = csv.slice(1).map((line) => Object.fromEntries(line.split(',').map((v, i) => [header[i], v])));
    expect(cells.map((c) => [Number(c.cached_tokens), Number(c.reasoning_tokens), Number(c.cost)]).reverse()).toEqual(rows.map((r) => [r.cached_tokens, r.reasoning_tokens, major(BigInt(r.cost))]));
    const report = (await (await fetch(`${bed.nodes[0]!.url}/v1/router/cost`, auth)).json()) as any;
    expect(report.items).toEqual([{ cost_usd: major(total), tokens: 4 * 1008 + 4 }]);
    await bed.expectBooksBalanced();
  }, 60_000);

  test('agent turns and replays bill the formula with the group multiplier too', async () => {
    bed.up.set({ promptTokens: 500, cachedTokens: 100, cachedField: 'prompt_tokens_details', reasoning: 'hmm ', content: 'one two' });
    const call = (key: string, path: string, body: unknown) =>
      fetch(`${bed.nodes[0]!.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const agent = (await (await call(caller.key, '/v1/agents', { model: 'm1' })).json()) as { id: string };
    const session = (await (await call(caller.key, '/v1/agents/sessions', { agent_id: agent.id })).json()) as { id: string };
    // The streamed turn: it has ended, and been billed, when its stream has.
    const turn = await call(caller.key, `/v1/agents/sessions/${session.id}/events/stream`, { role: 'user', content: 'hi' });
    expect(await turn.text()).toContain('turn.completed');

    expect((await call(capturing, '/v1/chat/completions', { model: 'm1', messages: [{ role: 'user', content: 'capture me' }] })).status).toBe(200);
    const captured = await waitFor(
      async () => (await bed.db.database.query<{ id: string }>(sql`select id from captures order by created_at limit 1`))[0],
      'the capture',
      { until: (c) => c !== undefined },
    );
    const replay = await call(capturing, '/v1/router/replay', { capture_id: captured!.id });
    expect(replay.status).toBe(200);
    const cost = expected(500, 100, 3);
    expect(replay.headers.get('x-cost')).toBe(major(cost).toFixed(6));

    const rows = await bed.db.database.query<{ entrypoint: string; cost: string }>(sql`
      select entrypoint, cost_micros::text as cost from router_usage where user_id = ${caller.userId} and prompt_tokens = 500 order by created_at`);
    expect(rows.map((r) => [r.entrypoint, BigInt(r.cost)])).toEqual([
      ['m1', cost],
      ['m1', cost],
      ['replay', cost],
    ]);
    await bed.expectBooksBalanced();
  }, 60_000);

  test('a code credits once under 100 concurrent attempts on two processes; every refusal is the same 400; the throttle holds across them', async () => {
    const code = batch.codes[0]!;
    const attempts = Array.from({ length: 100 }, (_, i) =>
      fetch(`${bed.nodes[i % 2]!.url}/api/billing/redeem`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sessions[i % 10]}`, 'content-type': 'application/json' },
        body: JSON.stringify({ code }),
      }).then(async (r) => ({ status: r.status, text: await r.text() })),
    );
    const answers = await Promise.all(attempts);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    const refused = answers.filter((a) => a.status !== 200);
    expect(new Set(refused.map((a) => `${a.status} ${a.text}`))).toEqual(new Set(['400 {"error":"invalid code"}']));
    const credits = await bed.db.database.query<{ n: number; s: string }>(sql`select count(*)::int as n, sum(amount_micros)::text as s from wallet_transactions where reference like 'redemption:%'`);
    expect(credits[0]).toEqual({ n: 1, s: '12500000' });
    // Nine users failed 10 times each: their next attempt is 429 on either process.
    const winner = answers.findIndex((a) => a.status === 200) % 10;
    const loser = sessions[(winner + 1) % 10]!;
    for (const node of bed.nodes) {
      const r = await fetch(`${node.url}/api/billing/redeem`, { method: 'POST', headers: { authorization: `Bearer ${loser}`, 'content-type': 'application/json' }, body: JSON.stringify({ code: 'ANY' }) });
      expect(r.status).toBe(429);
    }
  }, 60_000);
});

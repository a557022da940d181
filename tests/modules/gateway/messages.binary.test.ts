/**
 * The Anthropic Messages API on `dist/cpd`, driven as Claude Code drives it: a separate process
 * running the official SDK configured only by the README's variables (its ```sh claude-code block,
 * run by bash: ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN; then ANTHROPIC_API_KEY, the README's
 * alternative), a two-turn tool loop with thinking, on a Claude model
 * name the operator routed to an OpenAI-compatible backend (translated) and to an anthropic-format
 * backend (passed through, thinking signatures checked by the backend). Every request is billed
 * exactly by the prices, each balance equals its ledger, the cost report and metrics count them;
 * and every refusal answers in Anthropic's error shape, never 500.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeAnthropic, signatureOf, startFakeAnthropic } from '../../support/fake-anthropic';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { readmeEnv } from '../../support/readme';

const SONNET = 'claude-sonnet-5-5';
const OPUS = 'claude-opus-5-5';
const ANTHROPIC_KEY = 'sk-ant-binary';
/** Per million tokens = micro-units per token. m1: input 1000, output 2000, cached 500; claude-up: 1000, 5000, 100. */
const M1 = { input: 1000n, output: 2000n, cached: 500n };
const UP = { input: 1000n, output: 5000n, cached: 100n };
const FUNDS = 10_000_000n;

let db: TestDatabase;
let up: FakeUpstream;
let fa: FakeAnthropic;
let cpd: RunningBinary;
const users: Record<'rich' | 'poor', { userId: string; key: string; keyId: string }> = {} as never;
let rpmKey = '';

beforeAll(async () => {
  await ensureBuilt();
  db = await createTestDatabase('postgres');
  up = await startFakeUpstream({ models: ['m1'] });
  fa = await startFakeAnthropic({ apiKey: ANTHROPIC_KEY, models: ['claude-up'] });
  const tc = await createTestContext('postgres', {}, { testDb: db });
  try {
    const { services } = await buildApp(tc.ctx);
    await services.pricing.setModelPrices([
      { slug: 'm1', unit: 'per_million_tokens', price: 1000, input_price: 1000, output_price: 2000, cached_input_price: 500 },
      { slug: 'claude-up', unit: 'per_million_tokens', price: 1000, input_price: 1000, output_price: 5000, cached_input_price: 100 },
    ]);
    for (const [name, funds] of [
      ['rich', FUNDS],
      ['poor', 0n],
    ] as const) {
      const user = await services.accounts.createUser({ email: `${name}@example.com`, password: 'binary-password' });
      const key = await services.accounts.createApiKey(user.id, { name });
      if (funds) await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: funds, reference: `funds-${name}`, description: 'funds' });
      users[name] = { userId: user.id, key: key.key, keyId: key.id };
    }
    rpmKey = (await services.accounts.createApiKey(users.rich.userId, { name: 'slow', rpm: 1 })).key;
  } finally {
    await tc.close();
  }
  cpd = await startBinary({
    env: {
      DATABASE_URL: db.url!,
      MODEL_BACKENDS: `m1=${up.url},claude-up=anthropic+${fa.url}#env:UPSTREAM_ANTHROPIC_KEY`,
      UPSTREAM_ANTHROPIC_KEY: ANTHROPIC_KEY,
      ROUTES: `${SONNET}=fallback:m1;${OPUS}=fallback:claude-up`,
    },
  });
}, 120_000);
afterAll(async () => {
  await cpd?.stop();
  await up?.close();
  await fa?.close();
  await db?.drop();
});

/** Runs the session script with only the README's variables (and PATH, HOME) in its environment. */
async function session(model: string, readme: Record<string, string>) {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, '../../support/anthropic-env-session.ts'), model], {
    cwd: join(import.meta.dir, '../../..'),
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...readme },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  expect(await proc.exited).toBe(0);
  const line = out.trim().split('\n').at(-1);
  if (!line) throw new Error(`the session printed nothing: ${err}`);
  return JSON.parse(line);
}

const rowsOf = (userId: string) =>
  db.database.query<{ entrypoint: string; model: string; prompt_tokens: number; cached_tokens: number; completion_tokens: number; cost: string; ledger: string | null; status: number }>(sql`
    select u.entrypoint, u.model, u.prompt_tokens, u.cached_tokens, u.completion_tokens, u.cost_micros::text as cost, (-t.amount_micros)::text as ledger, u.status
    from router_usage u left join wallet_transactions t on t.reference = 'usage:' || u.id
    where u.user_id = ${userId} order by u.created_at, u.id`);
const balanceOf = async (userId: string) => BigInt((await db.database.query<{ b: string }>(sql`select balance_micros::text as b from wallets where user_id = ${userId}`))[0]!.b);
const ledgerOf = async (userId: string) =>
  BigInt((await db.database.query<{ s: string }>(sql`select coalesce(sum(amount_micros), 0)::text as s from wallet_transactions where user_id = ${userId}`))[0]!.s);

describe('Claude Code against dist/cpd', () => {
  test('a tool loop with thinking, translated to an OpenAI-compatible backend (ANTHROPIC_AUTH_TOKEN), then passed through to an anthropic backend (ANTHROPIC_API_KEY): billed exactly', async () => {
    up.set((b) =>
      b.messages.some((m: { role: string }) => m.role === 'tool')
        ? { promptTokens: 100, cachedTokens: 40, reasoning: 'done ', content: 'README says cpd.' }
        : { promptTokens: 100, cachedTokens: 40, reasoning: 'I will read it', toolCalls: [{ id: 'call_1', name: 'read_file', arguments: '{"path":"README.md"}' }] },
    );
    const readme = await readmeEnv('sh claude-code', cpd.url, users.rich.key);
    expect(readme).toEqual({ ANTHROPIC_BASE_URL: cpd.url, ANTHROPIC_AUTH_TOKEN: users.rich.key });
    const translated = await session(SONNET, readme);
    expect(translated.error).toBeUndefined();
    expect(translated.turn1.content.map((b: { type: string }) => b.type)).toEqual(['thinking', 'tool_use']);
    expect(translated.turn1.content[1]).toMatchObject({ name: 'read_file', input: { path: 'README.md' } });
    expect(translated.turn2.content).toEqual([
      { type: 'thinking', thinking: 'done ', signature: '' },
      { type: 'text', text: 'README says cpd.' },
    ]);

    fa.set((b) =>
      b.messages.length > 1
        ? { thinking: 'Now I know', text: 'It describes cpd.', usage: { input_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 500 } }
        : { thinking: 'I will read it', text: '', toolUse: { id: 'toolu_1', name: 'read_file', input: { path: 'README.md' } }, usage: { input_tokens: 30, cache_creation_input_tokens: 500, cache_read_input_tokens: 0 } },
    );
    const passed = await session(OPUS, { ANTHROPIC_BASE_URL: readme.ANTHROPIC_BASE_URL!, ANTHROPIC_API_KEY: readme.ANTHROPIC_AUTH_TOKEN! });
    expect(passed.error).toBeUndefined();
    expect(passed.turn1.content[0]).toEqual({ type: 'thinking', thinking: 'I will read it', signature: signatureOf('I will read it') });
    expect(passed.turn2.content.map((b: { type: string }) => b.type)).toEqual(['thinking', 'text']);
    // The backend checks each thinking signature sent back: turn 2 answered, so it arrived intact.
    const sentBack = fa.requests.filter((r) => r.path === '/v1/messages').at(-1)!;
    expect(sentBack.body!.messages[1].content[0]).toEqual({ type: 'thinking', thinking: 'I will read it', signature: signatureOf('I will read it') });
    expect(sentBack.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(sentBack.headers['anthropic-beta']).toBe('interleaved-thinking-2025-05-14');
    // The chat backend never heard of the beta flag.
    expect(up.requests.filter((r) => r.path === '/v1/chat/completions').every((r) => r.headers['anthropic-beta'] === undefined)).toBe(true);

    // Chat: (prompt − cached) × input + cached × cached input + completion × output; Anthropic: the
    // cache writes at the input price, the reads at the cached price, none of them twice.
    const expected = [
      [SONNET, 'm1', 100, 40, 5, 60n * M1.input + 40n * M1.cached + 5n * M1.output],
      [SONNET, 'm1', 100, 40, 4, 60n * M1.input + 40n * M1.cached + 4n * M1.output],
      [OPUS, 'claude-up', 530, 0, 5, 530n * UP.input + 5n * UP.output],
      [OPUS, 'claude-up', 540, 500, 6, 40n * UP.input + 500n * UP.cached + 6n * UP.output],
    ] as const;
    const rows = await rowsOf(users.rich.userId);
    expect(rows.map((r) => [r.entrypoint, r.model, r.prompt_tokens, r.cached_tokens, r.completion_tokens, BigInt(r.cost)])).toEqual(expected.map((e) => [...e]));
    expect(rows.every((r) => r.ledger === r.cost && r.status === 200)).toBe(true);
    const total = expected.reduce((sum, e) => sum + e[5], 0n);
    expect(await balanceOf(users.rich.userId)).toBe(FUNDS - total);
    expect(await ledgerOf(users.rich.userId)).toBe(FUNDS - total);
    expect(passed.turn2.usage).toMatchObject({ input_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 500, output_tokens: 6 });

    const auth = { headers: { authorization: `Bearer ${users.rich.key}` } };
    const report = (await (await fetch(`${cpd.url}/v1/router/cost?group_by=entrypoint`, auth)).json()) as { items: Array<{ entrypoint: string; cost_usd: number }> };
    const byEntry = Object.fromEntries(report.items.map((i) => [i.entrypoint, i.cost_usd]));
    expect(byEntry).toEqual({ [SONNET]: Number(expected[0][5] + expected[1][5]) / 1e6, [OPUS]: Number(expected[2][5] + expected[3][5]) / 1e6 });
    const metrics = await (await fetch(`${cpd.url}/metrics`)).text();
    expect(metrics).toContain('cpd_gateway_requests_total{model="claude-up",status="200"} 2');
    expect(metrics).toContain(`cpd_gateway_cost_micros_total{model="claude-up",currency="USD"} ${expected[2][5] + expected[3][5]}`);
  }, 60_000);

  test("refusals answer in Anthropic's error shape: 401, 400, 404, 402, 429; never 500", async () => {
    const post = (headers: Record<string, string>, body: unknown) =>
      fetch(`${cpd.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
    const hi = { model: SONNET, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
    const rich = { 'x-api-key': users.rich.key };
    const cases: Array<[string, Promise<Response>, number, string]> = [
      ['bad key', post({ 'x-api-key': 'bfvk-nope' }, hi), 401, 'authentication_error'],
      ['no key', post({}, hi), 401, 'authentication_error'],
      ['no max_tokens', post(rich, { model: SONNET, messages: hi.messages }), 400, 'invalid_request_error'],
      ['not JSON', post(rich, '{"model":'), 400, 'invalid_request_error'],
      ['bad block', post(rich, { ...hi, messages: [{ role: 'user', content: [{ type: 'text' }] }] }), 400, 'invalid_request_error'],
      ['bad role', post(rich, { ...hi, messages: [{ role: 'system', content: 'x' }] }), 400, 'invalid_request_error'],
      ['unknown model', post(rich, { ...hi, model: 'claude-nonexistent' }), 404, 'not_found_error'],
      ['no money', post({ 'x-api-key': users.poor.key }, hi), 402, 'billing_error'],
    ];
    for (const [what, pending, status, type] of cases) {
      const res = await pending;
      const body = (await res.json()) as { type: string; error: { type: string; message: string } };
      expect([what, res.status, body.type, body.error.type, typeof body.error.message]).toEqual([what, status, 'error', type, 'string']);
      expect(res.headers.get('x-cost')).toBe('0.000000');
    }
    up.set({ promptTokens: 10, cachedTokens: 0 });
    expect((await post({ 'x-api-key': rpmKey }, hi)).status).toBe(200);
    const limited = await post({ 'x-api-key': rpmKey }, hi);
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { type: string } }).error.type).toBe('rate_limit_error');
    expect(cpd.logs()).not.toContain('"status":500');
  }, 60_000);
});

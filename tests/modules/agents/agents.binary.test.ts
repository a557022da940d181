/**
 * The compiled binary serving the Agents API end to end: a tool-call conversation streamed over
 * SSE against a fake upstream, with AGENT_CLOUD_API_KEY set, then a clean SIGTERM.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createPricingService } from '../../../src/modules/pricing';
import { createTestContext } from '../../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { MODEL, PRICE_PER_MILLION, parseSse, WEATHER_TOOL, weatherBehaviour } from './agents.helpers';

const KEY = 'binary-cloud-key';

describe('agents in the compiled binary (postgres)', () => {
  let db: TestDatabase;
  let up: FakeUpstream;
  let cpd: RunningBinary;
  beforeAll(async () => {
    await ensureBuilt();
    db = await createTestDatabase('postgres');
    up = await startFakeUpstream({ models: [MODEL], behaviour: weatherBehaviour });
    const tc = await createTestContext('postgres', {}, { testDb: db });
    await createPricingService(tc.ctx).setModelPrices([{ slug: MODEL, unit: 'per_million_tokens', price: PRICE_PER_MILLION }]);
    await tc.close();
    cpd = await startBinary({ env: { DATABASE_URL: db.url!, MODEL_BACKENDS: `${MODEL}=${up.url}`, AGENT_CLOUD_API_KEY: KEY } });
  }, 120_000);
  afterAll(async () => {
    await cpd?.stop();
    await up?.close();
    await db?.drop();
  });

  const call = (method: string, path: string, body?: unknown, key: string | null = KEY) =>
    fetch(`${cpd.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `ApiKey ${key}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  test('a streamed tool-call conversation, and 401 without the key', async () => {
    expect((await call('GET', '/v1/agents', undefined, null)).status).toBe(401);
    const agent = (await (await call('POST', '/v1/agents', { model: MODEL, tools: [WEATHER_TOOL] })).json()) as { id: string };
    const session = (await (await call('POST', '/v1/agents/sessions', { agent_id: agent.id })).json()) as { id: string };

    const first = await call('POST', `/v1/agents/sessions/${session.id}/events/stream`, { role: 'user', content: 'Weather in Paris?' });
    expect(first.headers.get('content-type')).toStartWith('text/event-stream');
    expect(parseSse(await first.text()).map((f) => f.event)).toEqual(['tool_calls', 'turn.completed']);

    const second = await call('POST', `/v1/agents/sessions/${session.id}/events/stream`, {
      role: 'tool',
      tool_call_results: [{ call_id: 'call_w1', output: '{"temp":21}' }],
    });
    const frames = parseSse(await second.text());
    expect(frames.filter((f) => f.event === 'delta').map((f) => f.data.content).join('')).toBe('It is sunny in Paris.');
    expect(frames.at(-1)!.event).toBe('turn.completed');
    expect(((await (await call('GET', `/v1/agents/sessions/${session.id}`)).json()) as { status: string }).status).toBe('idle');
    expect((await call('GET', '/v1/vaults')).status).toBe(501);
  });

  test('a body nested more than 64 levels is 400 on agent create and update and on events; 64 levels are taken', async () => {
    const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
    const send = (method: string, path: string, text: string) =>
      fetch(`${cpd.url}${path}`, { method, headers: { 'content-type': 'application/json', authorization: `ApiKey ${KEY}` }, body: text });
    const deep = { error: 'the request body is nested more than 64 levels deep' };
    // Levels: the body, tools, a tool, parameters, then x and the arrays in it.
    const agentWith = (levels: number) => `{"model":"${MODEL}","tools":[{"type":"function","name":"f","parameters":{"x":${nested(levels - 4)}}}]}`;
    expect((await send('POST', '/v1/agents', agentWith(64))).status).toBe(201);
    for (const levels of [65, 20_000]) {
      const r = await send('POST', '/v1/agents', agentWith(levels));
      expect([levels, r.status, await r.json()]).toEqual([levels, 400, deep]);
    }
    const agent = (await (await call('POST', '/v1/agents', { model: MODEL })).json()) as { id: string };
    const update = await send('POST', `/v1/agents/${agent.id}`, agentWith(20_000));
    expect([update.status, await update.json()]).toEqual([400, deep]);
    const session = (await (await call('POST', '/v1/agents/sessions', { agent_id: agent.id })).json()) as { id: string };
    for (const path of [`/v1/agents/sessions/${session.id}/events`, `/v1/agents/sessions/${session.id}/events/stream`]) {
      const r = await send('POST', path, `{"role":"tool","tool_call_results":[{"call_id":"c","output":${nested(200_000)}}]}`);
      expect([path, r.status, await r.json()]).toEqual([path, 400, deep]);
    }
  });

  test('SIGTERM stops the server cleanly', async () => {
    expect(await cpd.stop()).toBe(0);
  });
});

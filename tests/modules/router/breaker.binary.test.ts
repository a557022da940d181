/**
 * The router breaker in the built binary: a backend failing half its requests opens its breaker
 * (admin list, cpd_router_breaker_state on /metrics, an audit entry by the system), a half-open
 * probe closes it again, and a malformed ROUTER_BREAKER stops `cpd serve` naming the variable.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { BINARY_PATH, ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { makeApiKey } from '../../support/make';
import { scrape } from '../../support/prometheus';
import { waitFor } from '../../support/wait';

const SECRET_KEY = 'binary-breaker-secret-0123456789abcdef01234';

describe('router breaker in dist/cpd (postgres)', () => {
  let db: TestDatabase;
  let flaky: FakeUpstream;
  let steady: FakeUpstream;
  let cpd: RunningBinary;
  let adminToken: string;
  let client: OpenAI;

  beforeAll(async () => {
    await ensureBuilt();
    db = await createTestDatabase('postgres');
    flaky = await startFakeUpstream({ models: ['m1'] });
    steady = await startFakeUpstream({ models: ['m1'] });
    let n = 0;
    flaky.set(() => (n++ % 2 === 0 ? { status: 502 } : {}));
    const tc = await createTestContext('postgres', {}, { testDb: db });
    const { services } = await buildApp(tc.ctx);
    await services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.001 }]);
    const admin = await services.accounts.createUser({ email: 'ops@example.com', password: 'ops-password-123', isAdmin: true });
    adminToken = (await services.accounts.createSession(admin.id)).token;
    const user = await services.accounts.createUser({ email: 'user@example.com', password: 'user-password-123' });
    const userKey = (await makeApiKey({ services }, user.id)).key;
    await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 1_000_000n, reference: 'funds', description: 'funds' });
    await tc.close();
    cpd = await startBinary({
      env: {
        DATABASE_URL: db.url!,
        SECRET_KEY,
        RATE_LIMITS: 'gateway=10000/1m',
        MODEL_BACKENDS: `m1=${flaky.url},m1=${steady.url}`,
        ROUTER_PROBE_INTERVAL: '1h',
        ROUTER_BACKOFF: '1ms',
        ROUTER_BACKOFF_MAX: '1ms',
        ROUTER_BREAKER: '50%/4/60s/1s',
      },
    });
    client = new OpenAI({ baseURL: `${cpd.url}/v1`, apiKey: userKey, maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await cpd?.stop();
    await Promise.all([flaky?.close(), steady?.close()]);
    await db?.drop();
  });

  const admin = (path: string) => fetch(`${cpd.url}${path}`, { headers: { authorization: `Bearer ${adminToken}` } }).then((r) => r.json() as Promise<any>);
  const breakerOf = async (up: FakeUpstream) => (await admin('/api/admin/router/backends')).backends.find((b: { url: string }) => b.url === up.url).breaker;
  const completionsOf = (up: FakeUpstream) => up.requests.filter((r) => r.path.endsWith('/chat/completions')).length;
  const ask = () => client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });

  test('opens on half failed, shows on /metrics and in the audit log; a probe closes it', async () => {
    // The flaky backend fails every other request it gets; each failure fails over to the steady one.
    for (let i = 0; i < 8 && (await breakerOf(flaky)).state === 'closed'; i++) expect((await ask()).choices[0]!.message.content).toBeTruthy();
    expect((await breakerOf(flaky)).state).not.toBe('closed');
    const metrics = await scrape(`${cpd.url}/metrics`);
    expect(metrics.typeOf('cpd_router_breaker_state')).toBe('gauge');
    expect(metrics.value('cpd_router_breaker_state', { model: 'm1', backend: steady.url })).toBe(0);
    expect(metrics.labelValues('cpd_router_breaker_state', 'backend').sort()).toEqual([flaky.url, steady.url].sort());
    // promtool's format check and naming lint find nothing to say of the breaker's samples.
    const checked = Bun.spawnSync(['promtool', 'check', 'metrics'], { stdin: new TextEncoder().encode(metrics.text) });
    expect(`${checked.stdout}${checked.stderr}`.split('\n').filter((line) => line.includes('breaker'))).toEqual([]);
    const opened = await waitFor(
      async () => (await admin('/api/admin/audit?limit=50')).entries.find((e: { action: string; details: { to: string } }) => e.action === 'router.breaker' && e.details.to === 'open'),
      'the audit entry of the breaker opening',
    );
    expect(opened).toMatchObject({ actor_id: null, target: `m1 ${flaky.url}`, details: { model: 'm1', backend: flaky.url, from: 'closed', via: 'system', attempts: 4, failures: 2 } });

    // After the cool-down the next request probes the flaky backend, which answers now.
    flaky.set({ status: null });
    await waitFor(async () => (await breakerOf(flaky)).state === 'half-open', 'the breaker half-open after its 1 s cool-down');
    expect((await scrape(`${cpd.url}/metrics`)).value('cpd_router_breaker_state', { model: 'm1', backend: flaky.url })).toBe(2);
    const before = completionsOf(flaky);
    await ask();
    expect(completionsOf(flaky)).toBe(before + 1);
    expect(await breakerOf(flaky)).toEqual({ state: 'closed', attempts: 0, failures: 0, probe_at: null });
    expect((await scrape(`${cpd.url}/metrics`)).value('cpd_router_breaker_state', { model: 'm1', backend: flaky.url })).toBe(0);
    expect(cpd.logs()).toContain('"msg":"router breaker changed"');
  });

  test('a malformed ROUTER_BREAKER stops serve with the variable named', async () => {
    const proc = Bun.spawn([BINARY_PATH, 'serve'], {
      env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', ROUTER_BREAKER: '50%' },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(code).toBe(2);
    expect(err).toContain('ROUTER_BREAKER');
  });
});

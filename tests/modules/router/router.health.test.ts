/** Router health (passive backoff, active probe, registerBackend), ROUTES parsing, per-key 429, and no usage lost on a graceful stop. */
import { describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { buildApp } from '../../../src/app';
import { ConfigError } from '../../../src/config';
import { parseRoutes, routerSettings } from '../../../src/config-router';
import { createTestContext } from '../../support/app';
import { createTestDatabase } from '../../support/db';
import { startFakeUpstream } from '../../support/fake-upstream';
import { makeApiKey, makeUser } from '../../support/make';
import { fundedUser, startHarness, waitFor } from '../gateway/gateway-harness';

describe('ROUTES', () => {
  test('parses name=strategy:a|b entries and refuses malformed ones naming the variable', () => {
    const r = parseRoutes('auto=fallback:a|b; cheap = cheapest:b|a;spread=least-loaded:x');
    expect([...r.values()]).toEqual([
      { name: 'auto', strategy: 'fallback', models: ['a', 'b'] },
      { name: 'cheap', strategy: 'cheapest', models: ['b', 'a'] },
      { name: 'spread', strategy: 'least-loaded', models: ['x'] },
    ]);
    for (const bad of ['auto', 'auto=random:a', 'auto=fallback:', 'a=fallback:x;a=fallback:y', 'auto=fallback:a||b'])
      expect(() => parseRoutes(bad)).toThrow(ConfigError);
  });
});

describe('backends', () => {
  test('registerBackend adds a backend at run time; the probe takes a dead one out and puts it back', async () => {
    const h = await startHarness({ env: { ROUTER_BACKOFF: '60s' } });
    try {
      await h.t.services.pricing.setModelPrices([{ slug: 'engine-1', unit: 'per_request', price: 0.01 }]);
      const u = await fundedUser(h, 1_000_000n);
      const engine = await startFakeUpstream({ models: ['engine-1'] });
      const unregister = h.t.services.router.registerBackend('engine-1', engine.url, { source: 'engine' });
      const r = await u.client.chat.completions.create({ model: 'engine-1', messages: [{ role: 'user', content: 'hi' }] });
      expect((r.usage as unknown as { cost: number }).cost).toBe(0.01);
      expect(h.t.services.router.listBackends().find((b) => b.model === 'engine-1')).toMatchObject({ source: 'engine', healthy: true });
      const port = engine.port;
      await engine.close();
      await h.t.services.router.probeBackends();
      expect(h.t.services.router.listBackends().find((b) => b.model === 'engine-1')).toMatchObject({ healthy: false });
      const revived = Bun.serve({ hostname: '127.0.0.1', port, fetch: () => Response.json({ object: 'list', data: [] }) });
      await h.t.services.router.probeBackends();
      expect(h.t.services.router.listBackends().find((b) => b.model === 'engine-1')).toMatchObject({ healthy: true, consecutive_failures: 0 });
      await revived.stop(true);
      unregister();
      expect(h.t.services.router.listBackends().some((b) => b.model === 'engine-1')).toBe(false);
      const gone = await u.client.chat.completions.create({ model: 'engine-1', messages: [{ role: 'user', content: 'hi' }] }).then(
        () => 200,
        (e) => e.status,
      );
      expect(gone).toBe(503);
      const listed = await fetch(`${h.baseUrl}/api/admin/router/backends`, { headers: { authorization: `Bearer ${(await makeUser(h.t, { admin: true })).token}` } });
      expect(((await listed.json()) as { backends: unknown[] }).backends.length).toBe(1);
    } finally {
      await h.close();
    }
  });

  test('rate limit per key: 429 with Retry-After, another key unaffected', async () => {
    const h = await startHarness({ env: { RATE_LIMITS: 'gateway=2/1m' } });
    try {
      await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.01 }]);
      const u = await fundedUser(h, 1_000_000n);
      const other = await fundedUser(h, 1_000_000n);
      const call = (c: typeof u.client) => c.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }).then(() => 200, (e) => e);
      expect(await call(u.client)).toBe(200);
      expect(await call(u.client)).toBe(200);
      const refused = await call(u.client);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBeTruthy();
      expect(await call(other.client)).toBe(200);
    } finally {
      await h.close();
    }
  });
});

describe('ROUTER_REQUEST_TIMEOUT', () => {
  test('defaults to 115s, under the server\'s 120 s idle timeout; at most 250s, under the 255 s Bun allows one request', () => {
    const timeout = (value: string) => routerSettings((n) => (n === 'ROUTER_REQUEST_TIMEOUT' ? value : undefined), null, {}).requestTimeoutMs;
    expect(routerSettings(() => undefined, null, {}).requestTimeoutMs).toBe(115_000);
    expect(timeout('30s')).toBe(30_000);
    expect(timeout('250s')).toBe(250_000);
    expect(() => timeout('251s')).toThrow(/ROUTER_REQUEST_TIMEOUT.*at most 250s/);
  });

  test('a completion slower than the server\'s idle timeout is answered, and a stream may pause as long between chunks', async () => {
    // The server closes a connection silent for 2 s; the upstream takes 3 s to answer, and pauses
    // 2.5 s between stream chunks. Without the request's own silence, the client got a reset.
    const up = await startFakeUpstream({
      models: ['m1'],
      behaviour: (body) => (body.stream ? { content: 'one two', chunkDelayMs: 2_500, trailerAtOnce: true } : { firstByteDelayMs: 3_000 }),
    });
    const h = await startHarness({ upstream: up, idleTimeout: 2, env: { ROUTER_FIRST_BYTE_TIMEOUT: '10s', ROUTER_REQUEST_TIMEOUT: '10s' } });
    try {
      await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.01 }]);
      const u = await fundedUser(h, 1_000_000n);
      const json = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
      expect(json.choices[0]!.message.content).toBe('Hello from the fake upstream.');
      const stream = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true });
      let text = '';
      let cost: number | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        cost ??= (chunk.usage as { cost?: number } | undefined)?.cost;
      }
      expect(text).toBe('one two');
      expect(cost).toBe(0.01);
      await h.t.services.router.flushUsage();
      expect(await u.balance()).toBe(1_000_000n - 2n * 10_000n);
    } finally {
      await h.close();
      await up.close();
    }
  }, 30_000);

  test('failover stops when the request\'s time runs out: a 503 naming it, the backend cut short not marked down, the next one never asked', async () => {
    // Each backend would answer after 5 s; one attempt may wait 1 s, the whole request 1.5 s.
    const slow = () => startFakeUpstream({ models: ['m1'], behaviour: { firstByteDelayMs: 5_000 } });
    const [a, b, c] = [await slow(), await slow(), await slow()];
    const h = await startHarness({
      upstream: a,
      backends: `m1=${a.url},m1=${b.url},m1=${c.url}`,
      env: { ROUTER_FIRST_BYTE_TIMEOUT: '1s', ROUTER_REQUEST_TIMEOUT: '1500ms', ROUTER_PROBE_INTERVAL: '1h' },
    });
    try {
      await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.01 }]);
      const u = await fundedUser(h, 1_000_000n);
      const err = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
      expect(err.status).toBe(503);
      expect(err.message).toContain('ROUTER_REQUEST_TIMEOUT (1.5s) ran out');
      const asked = [a, b, c].map((u) => u.stats.completions);
      expect(asked.sort()).toEqual([0, 1, 1]); // two attempts; the third backend never asked
      const health = h.t.services.router.listBackends();
      expect(health.filter((x) => !x.healthy)).toHaveLength(1); // the one that used its whole second
      expect(health.find((x) => !x.healthy)!.last_error).toContain('timed out after 1000 ms');
      await h.t.services.router.flushUsage();
      expect(await u.balance()).toBe(1_000_000n); // nothing billed
    } finally {
      await h.close();
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });
});

describe('least-loaded route', () => {
  test('picks the model whose backend has fewer requests in flight', async () => {
    const slow = await startFakeUpstream({ models: ['a'], behaviour: { firstByteDelayMs: 400 } });
    const fast = await startFakeUpstream({ models: ['b'] });
    const h = await startHarness({ upstream: slow, backends: `a=${slow.url},b=${fast.url}`, env: { ROUTES: 'spread=least-loaded:a|b' } });
    try {
      await h.t.services.pricing.setModelPrices([
        { slug: 'a', unit: 'per_request', price: 0.01 },
        { slug: 'b', unit: 'per_request', price: 0.01 },
      ]);
      const u = await fundedUser(h, 1_000_000n);
      const ask = (model: string) => u.client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 });
      expect((await ask('spread')).model).toBe('a');
      const busy = ask('a');
      await waitFor(() => slow.stats.completions === 2, 'a request in flight on a');
      expect((await ask('spread')).model).toBe('b');
      await busy;
    } finally {
      await h.close();
      await slow.close();
      await fast.close();
    }
  });
});

describe('balance cache across processes', () => {
  test('a credit made by another process (NOTIFY) lifts a 402 without a restart', async () => {
    const h = await startHarness();
    const other = await createTestContext('postgres', {}, { testDb: h.t.testDb });
    try {
      await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.01 }]);
      const u = await fundedUser(h, 0n);
      const call = () => u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }).then(() => 200, (e) => e.status as number);
      expect(await call()).toBe(402);
      const { services } = await buildApp(other.ctx);
      await services.billing.credit(other.ctx.database.db, { userId: u.user.id, type: 'topup', amountMicros: 20_000n, reference: 'other-process', description: 'top-up elsewhere' });
      await waitFor(async () => (await call()) === 200, 'the credit to be seen');
      await h.t.services.router.flushUsage();
      expect(await u.balance()).toBe(10_000n);
    } finally {
      await other.close();
      await h.close();
    }
  });
});

describe('graceful stop', () => {
  test('every queued usage row and debit is written when the app shuts down', async () => {
    const up = await startFakeUpstream({ models: ['m1'] });
    const testDb = await createTestDatabase('postgres');
    const tc = await createTestContext('postgres', { MODEL_BACKENDS: `m1=${up.url}`, RATE_LIMITS: 'gateway=100000/1s' }, { testDb });
    try {
      const { app, services } = await buildApp(tc.ctx);
      await services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.001 }]);
      const user = await services.accounts.createUser({ email: 'stop@example.com', password: 'password-123' });
      const key = await makeApiKey({ services }, user.id);
      await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 1_000_000n, reference: 'stop-test', description: 'funds' });
      const n = 200;
      const statuses = await Promise.all(
        Array.from({ length: n }, () =>
          app
            .handle(new Request('http://localhost/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }) }))
            .then((r) => r.status),
        ),
      );
      expect(statuses.every((s) => s === 200)).toBe(true);
      await tc.close(); // runs the shutdown hooks (the usage writer drains), keeps the database
      const check = await createTestContext('postgres', {}, { testDb: await reopen(testDb.url!) });
      const [row] = await check.ctx.database.query<{ n: number; debited: string; balance: string }>(
        sql`select (select count(*)::int from router_usage) as n,
                   (select (-sum(amount_micros))::text from wallet_transactions where type = 'usage') as debited,
                   (select balance_micros::text from wallets) as balance`,
      );
      expect(row).toEqual({ n, debited: String(n * 1000), balance: String(1_000_000 - n * 1000) });
      await check.close();
      await check.testDb.database.close();
    } finally {
      await up.close();
      await testDb.drop();
    }
  });
});

async function reopen(url: string) {
  const { openDatabase } = await import('../../../src/platform/db');
  const database = await openDatabase({ databaseUrl: url, maxConnections: 2 });
  return { database, url, drop: () => database.close() };
}

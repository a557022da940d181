/** GET /v1/router/cost: groupings, windows across the hourly rollup's edges, own-versus-admin scope, USD on the China site. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DB_KINDS } from '../../support/db';
import { fundedUser, type Harness, startHarness } from '../gateway/gateway-harness';

class SettableClock {
  at = new Date('2026-01-01T10:30:00Z');
  now = () => new Date(this.at);
}

const ask = (h: Harness, path: string, auth: { bearer?: string; cookie?: string }) =>
  fetch(`${h.baseUrl}${path}`, { headers: { ...(auth.bearer ? { authorization: `Bearer ${auth.bearer}` } : {}), ...(auth.cookie ? { cookie: `cpd_session=${auth.cookie}` } : {}) } }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as any,
  }));

/** Rows in a fixed order whatever the order of their keys (JSON key order is no part of the answer). */
const canonical = (row: Record<string, unknown>) => JSON.stringify(Object.keys(row).sort().map((k) => [k, row[k]]));
const sorted = (items: any[]) => [...items].sort((a, b) => canonical(a).localeCompare(canonical(b)));

describe('router cost report (intl, postgres)', () => {
  const clock = new SettableClock();
  let h: Harness;
  let a: Awaited<ReturnType<typeof fundedUser>>;
  let b: Awaited<ReturnType<typeof fundedUser>>;
  let admin: Awaited<ReturnType<typeof fundedUser>>;
  const hi = [{ role: 'user' as const, content: 'hi' }];

  beforeAll(async () => {
    h = await startHarness({ clock, env: { ROUTES: 'auto=fallback:m1' } });
    await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
    a = await fundedUser(h, 1_000_000n);
    b = await fundedUser(h, 1_000_000n);
    admin = await fundedUser(h, 0n, { admin: true });
    await a.client.chat.completions.create({ model: 'm1', messages: hi });
    await a.client.chat.completions.create({ model: 'm1', messages: hi });
    clock.at = new Date('2026-01-01T12:15:00Z');
    await b.client.chat.completions.create({ model: 'auto', messages: hi });
    clock.at = new Date('2026-01-01T12:20:00Z');
    await h.t.services.router.completeChat({ caller: null, body: { model: 'm1', messages: hi } });
    await h.t.services.router.flushUsage();
    clock.at = new Date('2026-01-01T12:30:00Z');
  });
  afterAll(() => h.close());

  test('a key sees only its own usage; default window is the last 30 days', async () => {
    const r = await ask(h, '/v1/router/cost', { bearer: a.key.key });
    expect(r.status).toBe(200);
    expect(r.body.items).toEqual([{ cost_usd: 0.03, tokens: 30 }]);
    expect(r.body.to).toBe('2026-01-01T12:30:00.000Z');
    expect(r.body.from).toBe('2025-12-02T12:30:00.000Z');
    const g = await ask(h, '/v1/router/cost?group_by=user,model,entrypoint', { bearer: a.key.key });
    expect(g.body.items).toEqual([{ user: a.user.email, model: 'm1', entrypoint: 'm1', cost_usd: 0.03, tokens: 30 }]);
  });

  test('an admin sees everyone, anonymous included; session cookie and bearer session both work', async () => {
    const byUser = await ask(h, '/v1/router/cost?group_by=user', { cookie: admin.user.token });
    expect(byUser.status).toBe(200);
    expect(sorted(byUser.body.items)).toEqual(
      sorted([
        { user: a.user.email, cost_usd: 0.03, tokens: 30 },
        { user: b.user.email, cost_usd: 0.015, tokens: 15 },
        { user: 'anonymous', cost_usd: 0.015, tokens: 15 },
      ]),
    );
    const byEntry = await ask(h, '/v1/router/cost?group_by=entrypoint,model', { bearer: admin.user.token });
    expect(sorted(byEntry.body.items)).toEqual(
      sorted([
        { entrypoint: 'm1', model: 'm1', cost_usd: 0.045, tokens: 45 },
        { entrypoint: 'auto', model: 'm1', cost_usd: 0.015, tokens: 15 },
      ]),
    );
    const own = await ask(h, '/v1/router/cost', { cookie: b.user.token });
    expect(own.body.items).toEqual([{ cost_usd: 0.015, tokens: 15 }]);
  });

  test("an admin's API key gets its owner's usage only, never everyone's (admin scope needs a session)", async () => {
    const r = await ask(h, '/v1/router/cost?group_by=user', { bearer: admin.key.key });
    expect(r.status).toBe(200);
    expect(r.body.items.filter((i: { user: string }) => i.user !== admin.user.email)).toEqual([]);
  });

  test('windows: inside one hour, across rollup hours and partial edges, empty', async () => {
    const total = async (from: string, to: string) => (await ask(h, `/v1/router/cost?from=${from}&to=${to}`, { bearer: admin.user.token })).body.items[0].tokens;
    expect(await total('2026-01-01T09:00:00Z', '2026-01-01T13:00:00Z')).toBe(60);
    expect(await total('2026-01-01T10:00:00Z', '2026-01-01T10:31:00Z')).toBe(30);
    expect(await total('2026-01-01T10:45:00Z', '2026-01-01T13:00:00Z')).toBe(30);
    expect(await total('2026-01-01T10:29:00Z', '2026-01-01T12:16:00Z')).toBe(45);
    expect(await total('2026-01-01T11:00:00Z', '2026-01-01T12:00:00Z')).toBe(0);
    expect(await total('2026-01-01T12:20:00Z', '2026-01-01T12:20:00Z')).toBe(0);
  });

  test('windows over several days read the daily rollup and stay exact at the edges', async () => {
    clock.at = new Date('2026-01-03T05:10:00Z');
    await a.client.chat.completions.create({ model: 'm1', messages: hi });
    await h.t.services.router.flushUsage();
    // Two days later the admin's first session has expired: a new one.
    const { token } = await h.t.services.accounts.createSession(admin.user.id);
    const total = async (from: string, to: string) => (await ask(h, `/v1/router/cost?from=${from}&to=${to}`, { bearer: token })).body.items[0].tokens;
    expect(await total('2025-12-31T23:30:00Z', '2026-01-03T05:30:00Z')).toBe(75);
    expect(await total('2026-01-02T00:00:00Z', '2026-01-04T00:00:00Z')).toBe(15);
    expect(await total('2026-01-01T12:17:00Z', '2026-01-03T05:11:00Z')).toBe(30);
    expect(await total('2026-01-01T10:31:00Z', '2026-01-03T05:09:59Z')).toBe(30);
    clock.at = new Date('2026-01-01T12:30:00Z');
  });

  test('bad queries are 400, no credential 401', async () => {
    for (const q of ['group_by=user,colour', 'from=yesterday', 'to=2026-13-45T00:00:00Z', 'from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z']) {
      const r = await ask(h, `/v1/router/cost?${q}`, { bearer: a.key.key });
      expect({ q, status: r.status }).toEqual({ q, status: 400 });
      expect(typeof r.body.error).toBe('string');
    }
    expect((await ask(h, '/v1/router/cost', {})).status).toBe(401);
  });
});

describe.each(DB_KINDS)('router cost on the China site (%s)', (kind) => {
  test('cost_usd converts with USD_PER_CNY; the wallet is debited in CNY', async () => {
    const h = await startHarness({ kind, env: { SITE: 'cn', USD_PER_CNY: '0.5' } });
    try {
      await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
      const u = await fundedUser(h, 1_000_000n);
      const { response } = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
      expect(response.headers.get('x-cost')).toBe('0.015000');
      await h.t.services.router.flushUsage();
      expect(await u.balance()).toBe(1_000_000n - 15_000n);
      const r = await ask(h, '/v1/router/cost?group_by=model', { bearer: u.key.key });
      expect(r.body.items).toEqual([{ model: 'm1', cost_usd: 0.0075, tokens: 15 }]);
    } finally {
      await h.close();
    }
  });
});

describe('China-site cost_usd is exact over any range (postgres)', () => {
  test('3 × 105 µCNY at 0.1378 reports 43 µUSD (the exact sum converted once), whichever rollups a window reads', async () => {
    const clock = new SettableClock();
    clock.at = new Date('2026-01-01T10:30:00Z');
    const h = await startHarness({ clock, env: { SITE: 'cn', USD_PER_CNY: '0.1378' } });
    try {
      await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.000105 }]);
      const u = await fundedUser(h, 1_000_000n, { admin: true });
      const hi = [{ role: 'user' as const, content: 'hi' }];
      // One request in each kind of source: a whole day (daily rollup), a whole hour (hourly), a partial hour (raw rows).
      for (const at of ['2026-01-01T10:30:00Z', '2026-01-02T05:10:00Z', '2026-01-02T07:40:00Z']) {
        clock.at = new Date(at);
        await u.client.chat.completions.create({ model: 'm1', messages: hi });
      }
      await h.t.services.router.flushUsage();
      const cost = async (q: string) => (await ask(h, `/v1/router/cost?${q}`, { bearer: u.key.key })).body.items;
      // 315 µCNY × 0.1378 = 43.407 µUSD; per-request rounding (14 µUSD each) would say 42.
      expect(await cost('from=2025-12-31T00:00:00Z&to=2026-01-02T07:50:00Z')).toEqual([{ cost_usd: 0.000043, tokens: expect.any(Number) }]);
      expect(await cost('from=2025-12-31T00:00:00Z&to=2026-01-02T07:50:00Z&group_by=model')).toEqual([{ model: 'm1', cost_usd: 0.000043, tokens: expect.any(Number) }]);
      // One request alone: 14.469 µUSD.
      expect((await cost('from=2026-01-02T07:00:00Z&to=2026-01-02T08:00:00Z'))[0].cost_usd).toBe(0.000014);
      // Two: 28.938 µUSD rounds to 29, where two rounded requests would be 28.
      expect((await cost('from=2026-01-02T00:00:00Z&to=2026-01-02T08:00:00Z'))[0].cost_usd).toBe(0.000029);
      expect(await u.balance()).toBe(1_000_000n - 315n);
    } finally {
      await h.close();
    }
  });
});

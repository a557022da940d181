/**
 * Backends at run time: PUT /api/admin/router/backends (validation, write-only keys sealed at rest,
 * Authorization upstream, weights, enabled), MODEL_BACKENDS `#env:` keys, and no key in any answer
 * or log line. Two processes on one database: tests/modules/router/backends.binary.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { DB_KINDS } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { fundedUser, type Harness, startHarness } from '../gateway/gateway-harness';

const ENV_KEY = 'sk-env-0123456789abcdef';
const ADMIN_KEY = 'sk-admin-fedcba9876543210';
const OTHER_KEY = 'sk-other-aaaabbbbccccdddd';

describe.each(DB_KINDS)('run-time backends (%s)', (kind) => {
  let h: Harness;
  let keyed: FakeUpstream;
  let other: FakeUpstream;
  let open: FakeUpstream;
  let admin: Awaited<ReturnType<typeof fundedUser>>;
  let user: Awaited<ReturnType<typeof fundedUser>>;
  const hi = [{ role: 'user' as const, content: 'hi' }];

  const put = (backends: unknown, token = admin.user.token) =>
    fetch(`${h.baseUrl}/api/admin/router/backends`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ backends }),
    }).then(async (r) => ({ status: r.status, text: await r.text() }));
  const list = async () => {
    const r = await fetch(`${h.baseUrl}/api/admin/router/backends`, { headers: { authorization: `Bearer ${admin.user.token}` } });
    return { status: r.status, text: await r.text() };
  };
  const adminSet = async () => JSON.parse((await list()).text).backends.filter((b: { source: string }) => b.source === 'admin');

  beforeAll(async () => {
    keyed = await startFakeUpstream({ models: ['m2'], apiKey: ADMIN_KEY });
    other = await startFakeUpstream({ models: ['m2'], apiKey: OTHER_KEY });
    open = await startFakeUpstream({ models: ['m2'] });
    const envUpstream = await startFakeUpstream({ models: ['m1'], apiKey: ENV_KEY });
    h = await startHarness({
      kind,
      upstream: envUpstream,
      backends: `m1=${envUpstream.url}#env:M1_KEY`,
      env: { M1_KEY: ENV_KEY, ROUTES: 'auto=fallback:m1|m2', ROUTER_PROBE_INTERVAL: '1h' },
    });
    await h.t.services.pricing.setModelPrices([
      { slug: 'm1', unit: 'per_request', price: 0.001 },
      { slug: 'm2', unit: 'per_request', price: 0.001 },
    ]);
    admin = await fundedUser(h, 0n, { admin: true });
    user = await fundedUser(h, 10_000_000n);
  });
  afterAll(async () => {
    await h.close();
    await h.up.close();
    await Promise.all([keyed.close(), other.close(), open.close()]);
  });

  test('a MODEL_BACKENDS key named by #env: is sent upstream as Authorization: Bearer', async () => {
    const r = await user.client.chat.completions.create({ model: 'm1', messages: hi });
    expect(r.choices[0]!.message.content).toBeTruthy();
    expect(h.up.requests.at(-1)!.headers.authorization).toBe(`Bearer ${ENV_KEY}`);
    expect(JSON.parse((await list()).text).backends).toEqual([expect.objectContaining({ model: 'm1', source: 'env', has_api_key: true, weight: 1, enabled: true })]);
  });

  test('no credential 401, a non-admin 403', async () => {
    const none = await fetch(`${h.baseUrl}/api/admin/router/backends`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ backends: [] }) });
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: expect.any(String) });
    expect((await put([{ model: 'm2', url: open.url }], user.user.token)).status).toBe(403);
    expect((await fetch(`${h.baseUrl}/api/admin/router/backends`, { headers: { authorization: `Bearer ${user.user.token}` } })).status).toBe(403);
  });

  test('PUT with a key: the upstream receives it, no answer shows it, the database holds it sealed', async () => {
    const r = await put([{ model: 'm2', url: keyed.url, api_key: ADMIN_KEY }]);
    expect(r.status).toBe(200);
    expect(r.text).not.toContain(ADMIN_KEY);
    expect(JSON.parse(r.text).backends).toContainEqual(expect.objectContaining({ model: 'm2', url: keyed.url, source: 'admin', has_api_key: true, weight: 1, enabled: true, healthy: true }));
    const answer = await user.client.chat.completions.create({ model: 'm2', messages: hi });
    expect(answer.model).toBe('m2');
    expect(keyed.requests.at(-1)!.headers.authorization).toBe(`Bearer ${ADMIN_KEY}`);
    let streamed = '';
    for await (const chunk of await user.client.chat.completions.create({ model: 'm2', messages: hi, stream: true })) streamed += chunk.choices[0]?.delta?.content ?? '';
    expect(streamed).toBeTruthy();
    expect(keyed.requests.at(-1)!.body!.stream).toBe(true);
    expect(keyed.requests.at(-1)!.headers.authorization).toBe(`Bearer ${ADMIN_KEY}`);
    await h.t.services.router.probeBackends();
    expect(keyed.requests.at(-1)).toMatchObject({ path: '/v1/models', headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(await adminSet()).toEqual([expect.objectContaining({ healthy: true })]);
    expect((await list()).text).not.toContain(ADMIN_KEY);
    const rows = await h.t.ctx.database.query<{ api_key_sealed: string }>(sql`select api_key_sealed from router_backends`);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.api_key_sealed).toMatch(/^v1\./);
    expect(rows[0]!.api_key_sealed).not.toContain(ADMIN_KEY);
    expect(rows[0]!.api_key_sealed).not.toContain(Buffer.from(ADMIN_KEY).toString('base64url'));
  });

  test('an omitted api_key keeps the stored one; null removes it (then the keyed upstream refuses: 502)', async () => {
    expect((await put([{ model: 'm2', url: `${keyed.url}/`, weight: 2 }])).status).toBe(200);
    expect(await adminSet()).toEqual([expect.objectContaining({ url: keyed.url, has_api_key: true, weight: 2 })]);
    await user.client.chat.completions.create({ model: 'm2', messages: hi });
    expect(keyed.requests.at(-1)!.headers.authorization).toBe(`Bearer ${ADMIN_KEY}`);

    expect((await put([{ model: 'm2', url: keyed.url, api_key: null }])).status).toBe(200);
    expect(await adminSet()).toEqual([expect.objectContaining({ has_api_key: false })]);
    const refused = await fetch(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm2', messages: hi }),
    });
    expect(refused.status).toBe(502);
    expect(keyed.requests.at(-1)!.headers.authorization).toBeUndefined();
  });

  test.each([
    ['a URL that is not http(s)', [{ model: 'm2', url: 'ftp://example.com/v1' }]],
    ['a URL that does not parse', [{ model: 'm2', url: 'not a url' }]],
    ['a URL with credentials', [{ model: 'm2', url: 'http://user:pw@example.com/v1' }]],
    ['weight 0', [{ model: 'm2', url: 'http://example.com/v1', weight: 0 }]],
    ['weight 101', [{ model: 'm2', url: 'http://example.com/v1', weight: 101 }]],
    ['a fractional weight', [{ model: 'm2', url: 'http://example.com/v1', weight: 1.5 }]],
    ['a duplicate model+URL', [{ model: 'm2', url: 'http://example.com/v1' }, { model: 'm2', url: 'http://example.com/v1/' }]],
    ['a model named like a route', [{ model: 'auto', url: 'http://example.com/v1' }]],
    ['a model that is not a slug', [{ model: 'a b', url: 'http://example.com/v1' }]],
    ['an API key with a space', [{ model: 'm2', url: 'http://example.com/v1', api_key: 'sk a' }]],
    ['an API key with a newline', [{ model: 'm2', url: 'http://example.com/v1', api_key: 'sk\r\nx: y' }]],
    ['enabled as a string', [{ model: 'm2', url: 'http://example.com/v1', enabled: 'yes' }]],
    ['not a list', 'x'],
  ])('%s is 400 and changes nothing', async (_what, backends) => {
    // The set as configured: the health fields may change meanwhile (a probe is due every 10 s).
    const configured = async () =>
      (await adminSet()).map(({ model, url, weight, enabled, has_api_key }: Record<string, unknown>) => ({ model, url, weight, enabled, has_api_key }));
    const before = await configured();
    const r = await put(backends);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text)).toEqual({ error: expect.any(String) });
    expect(await configured()).toEqual(before);
  });

  test('weights share the traffic exactly when idle; a disabled backend gets none', async () => {
    expect(
      (
        await put([
          { model: 'm2', url: keyed.url, api_key: ADMIN_KEY, weight: 3 },
          { model: 'm2', url: other.url, api_key: OTHER_KEY, weight: 1 },
          { model: 'm2', url: open.url, enabled: false },
        ])
      ).status,
    ).toBe(200);
    const counts = () => [keyed, other, open].map((u) => u.requests.filter((r) => r.path === '/v1/chat/completions').length);
    const start = counts();
    for (let i = 0; i < 40; i++) await user.client.chat.completions.create({ model: 'm2', messages: hi });
    const end = counts();
    expect(end.map((n, i) => n - start[i]!)).toEqual([30, 10, 0]);
    expect(await adminSet()).toContainEqual(expect.objectContaining({ url: open.url, enabled: false }));
  });

  test('an empty set removes the admin backends: the model is no longer listed or served', async () => {
    expect((await put([])).status).toBe(200);
    expect(await adminSet()).toEqual([]);
    const models = await user.client.models.list();
    expect(models.data.map((m) => m.id)).not.toContain('m2');
    expect(models.data.map((m) => m.id)).toContain('m1');
  });

  test('no key appears in any log line', () => {
    const logs = h.t.logs.join('\n');
    expect(logs.length).toBeGreaterThan(0);
    for (const k of [ENV_KEY, ADMIN_KEY, OTHER_KEY]) expect(logs).not.toContain(k);
  });
});

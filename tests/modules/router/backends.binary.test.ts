/**
 * Two `dist/cpd serve` processes on one database: a backend set PUT on the first is used by the
 * second (NOTIFY), with its key sent upstream; the key is in no answer and no log line of either.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { makeApiKey } from '../../support/make';
import { waitFor } from '../../support/wait';

const UPSTREAM_KEY = 'sk-hosted-5f4dcc3b5aa765d61d8327deb882cf99';
const SECRET_KEY = 'binary-backends-secret-0123456789abcdef0123';

describe('backends at run time across two cpd processes (postgres)', () => {
  let db: TestDatabase;
  let oldUpstream: FakeUpstream;
  let hosted: FakeUpstream;
  let first: RunningBinary;
  let second: RunningBinary;
  let adminToken: string;
  let userKey: string;

  beforeAll(async () => {
    await ensureBuilt();
    db = await createTestDatabase('postgres');
    oldUpstream = await startFakeUpstream({ models: ['m1'], behaviour: { content: 'from the old backend' } });
    hosted = await startFakeUpstream({ models: ['m1'], apiKey: UPSTREAM_KEY, behaviour: { content: 'from the hosted backend' } });
    const tc = await createTestContext('postgres', {}, { testDb: db });
    const { services } = await buildApp(tc.ctx);
    await services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.001 }]);
    const admin = await services.accounts.createUser({ email: 'ops@example.com', password: 'ops-password-123', isAdmin: true });
    adminToken = (await services.accounts.createSession(admin.id)).token;
    const user = await services.accounts.createUser({ email: 'user@example.com', password: 'user-password-123' });
    userKey = (await makeApiKey({ services }, user.id)).key;
    await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 1_000_000n, reference: 'funds', description: 'funds' });
    await tc.close();
    const env = { DATABASE_URL: db.url!, SECRET_KEY, RATE_LIMITS: 'gateway=10000/1m', ROUTER_PROBE_INTERVAL: '1h' };
    [first, second] = await Promise.all([startBinary({ env }), startBinary({ env })]);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
    await Promise.all([oldUpstream?.close(), hosted?.close()]);
    await db?.drop();
  });

  const put = (bin: RunningBinary, backends: unknown) =>
    fetch(`${bin.url}/api/admin/router/backends`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ backends }),
    });
  const answerFrom = async (bin: RunningBinary) => {
    const client = new OpenAI({ baseURL: `${bin.url}/v1`, apiKey: userKey, maxRetries: 0 });
    return (await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] })).choices[0]!.message.content;
  };

  test('the second process follows a PUT on the first, sending the new key upstream', async () => {
    const before = await put(first, [{ model: 'm1', url: oldUpstream.url }]);
    expect(before.status).toBe(200);
    await waitFor(async () => (await answerFrom(second).catch(() => null)) === 'from the old backend', 'the second process uses the first set');

    const res = await put(first, [{ model: 'm1', url: hosted.url, api_key: UPSTREAM_KEY, weight: 5 }]);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).not.toContain(UPSTREAM_KEY);
    const answeredAt = performance.now();
    await waitFor(async () => (await answerFrom(second).catch(() => null)) === 'from the hosted backend', 'the second process uses the new set', { timeoutMs: 5_000 });
    console.log(`the second process used the new set ${Math.round(performance.now() - answeredAt)} ms after the PUT answered`);
    expect(hosted.requests.filter((r) => r.path === '/v1/chat/completions').every((r) => r.headers.authorization === `Bearer ${UPSTREAM_KEY}`)).toBe(true);
    expect(await answerFrom(first)).toBe('from the hosted backend');

    const listed = await fetch(`${second.url}/api/admin/router/backends`, { headers: { authorization: `Bearer ${adminToken}` } });
    const listedText = await listed.text();
    expect(listedText).not.toContain(UPSTREAM_KEY);
    expect(JSON.parse(listedText).backends).toEqual([expect.objectContaining({ model: 'm1', url: hosted.url, source: 'admin', weight: 5, enabled: true, has_api_key: true })]);
  });

  test('bad input is 400 on the binary and changes nothing', async () => {
    for (const backends of [[{ model: 'm1', url: 'ftp://x/v1' }], [{ model: 'm1', url: hosted.url, weight: 0 }], [{ model: 'm1', url: hosted.url }, { model: 'm1', url: hosted.url }]]) {
      const res = await put(second, backends);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: expect.any(String) });
    }
    expect(await answerFrom(second)).toBe('from the hosted backend');
  });

  test('the key is in no log line of either process', () => {
    for (const bin of [first, second]) {
      expect(bin.logs()).toContain('"msg":"listening"');
      expect(bin.logs()).not.toContain(UPSTREAM_KEY);
    }
  });
});

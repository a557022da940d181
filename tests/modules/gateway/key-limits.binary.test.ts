/**
 * Two `dist/cpd serve` processes on one database share an API key's spend limit: concurrent
 * requests through both overspend it by at most one request, and a PATCH on one process holds on
 * the other as soon as it answers.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { waitFor } from '../../support/wait';

const PER_REQUEST = 0.1;
const LIMIT = 0.5;
const msg = [{ role: 'user' as const, content: 'hi' }];

describe('an API key spend limit across two cpd processes (postgres)', () => {
  let db: TestDatabase;
  let up: FakeUpstream;
  let first: RunningBinary;
  let second: RunningBinary;
  let token: string;
  let key: { id: string; key: string };

  beforeAll(async () => {
    await ensureBuilt();
    db = await createTestDatabase('postgres');
    // Slow answers keep many requests in flight on both processes at once.
    up = await startFakeUpstream({ models: ['pr'], behaviour: { firstByteDelayMs: 50 } });
    const tc = await createTestContext('postgres', {}, { testDb: db });
    const { services } = await buildApp(tc.ctx);
    await services.pricing.setModelPrices([{ slug: 'pr', unit: 'per_request', price: PER_REQUEST }]);
    const user = await services.accounts.createUser({ email: 'user@example.com', password: 'user-password-123' });
    token = (await services.accounts.createSession(user.id)).token;
    await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 100_000_000n, reference: 'funds', description: 'funds' });
    await tc.close();
    const env = { DATABASE_URL: db.url!, MODEL_BACKENDS: `pr=${up.url}`, RATE_LIMITS: 'gateway=10000/1m', ROUTER_PROBE_INTERVAL: '1h' };
    [first, second] = await Promise.all([startBinary({ env }), startBinary({ env })]);
    const created = await fetch(`${first.url}/api/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'shared budget', spend_limit: LIMIT, spend_period: 'month' }),
    });
    expect(created.status).toBe(201);
    key = (await created.json()) as typeof key;
  }, 120_000);
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
    await up?.close();
    await db?.drop();
  });

  const statusVia = (bin: RunningBinary, model = 'pr') =>
    new OpenAI({ baseURL: `${bin.url}/v1`, apiKey: key.key, maxRetries: 0 }).chat.completions.create({ model, messages: msg }).then(
      () => 200,
      (e: { status?: number }) => e.status ?? 0,
    );
  const listed = async (bin: RunningBinary) =>
    ((await (await fetch(`${bin.url}/api/api-keys`, { headers: { authorization: `Bearer ${token}` } })).json()) as Array<{ id: string; spent: number; spend_limit: number | null }>).find(
      (k) => k.id === key.id,
    )!;
  const patch = (bin: RunningBinary, body: unknown) =>
    fetch(`${bin.url}/api/api-keys/${key.id}`, { method: 'PATCH', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  test('concurrent requests through both processes overspend the limit by at most one request', async () => {
    const statuses = await Promise.all(Array.from({ length: 40 }, (_, i) => statusVia(i % 2 ? first : second)));
    expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
    const ok = statuses.filter((s) => s === 200).length;
    // Every answered request's usage row is committed once the listed amount stops moving up to it.
    await waitFor(async () => Math.abs((await listed(first)).spent - ok * PER_REQUEST) < 1e-9, 'spent equals the answered requests');
    const spent = (await listed(second)).spent;
    console.log(`${ok} of 40 concurrent requests answered; spent ${spent} of a ${LIMIT} limit`);
    expect(spent).toBeLessThanOrEqual(LIMIT + PER_REQUEST + 1e-9);
    expect(statuses).toContain(402);
    // Spent is at the limit (or one request past it): both processes refuse now.
    if (spent >= LIMIT) for (const bin of [first, second]) expect(await statusVia(bin)).toBe(402);
  });

  test('a PATCH on one process holds on the other as soon as it answers', async () => {
    expect((await patch(first, { spend_limit: 100, models: ['pr'] })).status).toBe(200);
    expect(await statusVia(second)).toBe(200);
    expect((await patch(second, { spend_limit: 0 })).status).toBe(200);
    expect(await statusVia(first)).toBe(402);
    expect((await patch(first, { spend_limit: null, rpm: 1 })).status).toBe(200);
    expect(await statusVia(second)).toBe(200);
    expect(await statusVia(second)).toBe(429);
    expect((await patch(second, { expires_at: new Date(Date.now() - 1000).toISOString() })).status).toBe(200);
    expect(await statusVia(first)).toBe(401);
  });
});

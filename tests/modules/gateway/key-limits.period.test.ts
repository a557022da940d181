/** Key limits over time, with a clock moved by hand: a day's spend limit starts again the next UTC day; a total one does not; expiry. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { sql } from 'drizzle-orm';
import { startFakeUpstream } from '../../support/fake-upstream';
import { manualClock } from '../../support/clock';
import { fundedUser, type Harness, startHarness, waitFor } from './gateway-harness';

const msg = [{ role: 'user' as const, content: 'hi' }];
const DAY_MS = 86_400_000;

describe('API key limits over time (postgres)', () => {
  const clock = manualClock(Date.parse('2026-03-31T22:00:00Z'));
  let h: Harness;
  let u: Awaited<ReturnType<typeof fundedUser>>;
  /** A session made now: the clock moves past the test user's first session's lifetime. */
  const token = async () => (await h.t.services.accounts.createSession(u.user.id)).token;
  const create = async (body: Record<string, unknown>) => {
    const res = await h.t.request('POST', '/api/api-keys', { token: await token(), body });
    expect(res.status).toBe(201);
    return res.body as { id: string; key: string };
  };
  const statusOf = (key: string) =>
    new OpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: key, maxRetries: 0 }).chat.completions.create({ model: 'pr', messages: msg }).then(
      () => 200,
      (e: { status?: number }) => e.status ?? 0,
    );
  const listed = async (id: string) =>
    ((await h.t.request('GET', '/api/api-keys', { token: await token() })).body as Array<{ id: string; spent: number }>).find(
      (k) => k.id === id,
    )!;
  const settled = async (keyId: string) => {
    await h.t.services.router.flushUsage();
    await waitFor(
      async () =>
        (await h.t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from key_spend_grants where key_id = ${keyId} and margin`))[0]!
          .n === 0,
      'margin given back',
    );
  };

  beforeAll(async () => {
    const up = await startFakeUpstream({ models: ['pr'] });
    h = await startHarness({ upstream: up, backends: `pr=${up.url}`, clock });
    await h.t.services.pricing.setModelPrices([{ slug: 'pr', unit: 'per_request', price: 0.1 }]);
    u = await fundedUser(h, 1_000_000_000n);
  });
  afterAll(async () => {
    await h.close();
    await h.up.close();
  });

  test('a day limit starts again the next UTC day, a month limit the next month, a total limit never', async () => {
    const day = await create({ name: 'day', spend_limit: 0.1, spend_period: 'day' });
    const month = await create({ name: 'month', spend_limit: 0.1, spend_period: 'month' });
    const total = await create({ name: 'total', spend_limit: 0.1 });
    for (const k of [day, month, total]) {
      expect(await statusOf(k.key)).toBe(200);
      await settled(k.id);
      expect(await statusOf(k.key)).toBe(402);
      expect((await listed(k.id)).spent).toBe(0.1);
    }
    // 2026-04-01T22:00Z: a new day and a new month.
    clock.advance(DAY_MS);
    expect((await listed(day.id)).spent).toBe(0);
    expect((await listed(month.id)).spent).toBe(0);
    expect((await listed(total.id)).spent).toBe(0.1);
    expect(await statusOf(day.key)).toBe(200);
    expect(await statusOf(month.key)).toBe(200);
    expect(await statusOf(total.key)).toBe(402);
    // The process dropped its grants of the old period and was granted shares of the new ones.
    const starts = await h.t.ctx.database.query<{ key_id: string; start: string }>(
      sql`select key_id, to_char(period_start at time zone 'UTC', 'YYYY-MM-DD') as start from key_spend_grants where key_id in (${day.id}, ${month.id})`,
    );
    expect(Object.fromEntries(starts.map((r) => [r.key_id, r.start]))).toEqual({ [day.id]: '2026-04-01', [month.id]: '2026-04-01' });
    await settled(day.id);
    await settled(month.id);
    // 2026-04-02: the day limit is free again; the month's is spent.
    clock.advance(DAY_MS);
    expect(await statusOf(day.key)).toBe(200);
    expect(await statusOf(month.key)).toBe(402);
  });

  test('a key is refused with 401 from its expires_at on', async () => {
    const soon = await create({ name: 'soon', expires_at: new Date(clock.now().getTime() + 3_600_000).toISOString() });
    expect(await statusOf(soon.key)).toBe(200);
    clock.advance(3_600_000);
    expect(await statusOf(soon.key)).toBe(401);
  });
});

/**
 * The compiled binary: the gateway bills through a real listener, and SIGTERM drains every queued
 * usage row and debit before the process exits.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { sql } from 'drizzle-orm';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { makeApiKey } from '../../support/make';

describe('gateway in the compiled binary (postgres)', () => {
  let db: TestDatabase;
  let up: FakeUpstream;
  let cpd: RunningBinary;
  let key: string;

  beforeAll(async () => {
    await ensureBuilt();
    db = await createTestDatabase('postgres');
    up = await startFakeUpstream({ models: ['m1'] });
    const tc = await createTestContext('postgres', {}, { testDb: db });
    const { services } = await buildApp(tc.ctx);
    await services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.002 }]);
    const user = await services.accounts.createUser({ email: 'binary@example.com', password: 'binary-password' });
    key = (await makeApiKey({ services }, user.id)).key;
    await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 1_000_000n, reference: 'binary', description: 'funds' });
    await tc.close();
    cpd = await startBinary({ env: { DATABASE_URL: db.url!, MODEL_BACKENDS: `m1=${up.url}`, RATE_LIMITS: 'gateway=10000/1m' } });
  }, 120_000);
  afterAll(async () => {
    await cpd?.stop();
    await up?.close();
    await db?.drop();
  });

  test('JSON and SSE requests are billed; SIGTERM writes every usage row before exit', async () => {
    const client = new OpenAI({ baseURL: `${cpd.url}/v1`, apiKey: key, maxRetries: 0 });
    const n = 40;
    const costs = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        if (i % 2) return (await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] })).usage as unknown as { cost: number };
        let last: unknown;
        for await (const c of await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true })) last = c;
        return (last as { usage: { cost: number } }).usage;
      }),
    );
    expect(costs.every((u) => u.cost === 0.002)).toBe(true);
    expect(await cpd.stop()).toBe(0);
    const [row] = await db.database.query<{ n: number; debited: string; balance: string }>(
      sql`select (select count(*)::int from router_usage where status = 200) as n,
                 (select (-sum(amount_micros))::text from wallet_transactions where type = 'usage') as debited,
                 (select balance_micros::text from wallets) as balance`,
    );
    expect(row).toEqual({ n, debited: String(n * 2000), balance: String(1_000_000 - n * 2000) });
  });
});

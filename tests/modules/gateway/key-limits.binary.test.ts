/**
 * Two and three `dist/cpd serve` processes on one database share an API key's spend limit (each
 * admitting against its grant of the key's budget): concurrent requests through all of them
 * overspend it by at most one request, a PATCH on one process holds on the others as soon as it
 * answers, even while they hold grants, and a killed process's grant lapses with its TTL.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import postgres from 'postgres';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { waitFor } from '../../support/wait';

const PER_REQUEST = 0.1;
const LIMIT = 0.5;
const msg = [{ role: 'user' as const, content: 'hi' }];

const GRANT_TTL_MS = 2_000;

for (const replicas of [2, 3])
  describe(`an API key spend limit across ${replicas} cpd processes (postgres)`, () => {
    let db: TestDatabase;
    let up: FakeUpstream;
    let bins: RunningBinary[];
    let first: RunningBinary;
    let second: RunningBinary;
    let sql: postgres.Sql;
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
      await services.billing.credit(tc.ctx.database.db, {
        userId: user.id,
        type: 'adjustment',
        amountMicros: 100_000_000n,
        reference: 'funds',
        description: 'funds',
      });
      await tc.close();
      sql = postgres(db.url!, { max: 1, onnotice: () => {} });
      const env = {
        DATABASE_URL: db.url!,
        MODEL_BACKENDS: `pr=${up.url}`,
        RATE_LIMITS: 'gateway=10000/1m',
        ROUTER_PROBE_INTERVAL: '1h',
        WALLET_GRANT_TTL: `${GRANT_TTL_MS}ms`,
        ROUTER_ADMISSION_WAIT: '1s',
      };
      bins = await Promise.all(Array.from({ length: replicas }, () => startBinary({ env })));
      [first, second] = bins as [RunningBinary, RunningBinary];
      const created = await fetch(`${first.url}/api/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'shared budget', spend_limit: LIMIT, spend_period: 'month' }),
      });
      expect(created.status).toBe(201);
      key = (await created.json()) as typeof key;
    }, 120_000);
    afterAll(async () => {
      await Promise.all((bins ?? []).map((b) => b.stop()));
      await sql?.end();
      await up?.close();
      await db?.drop();
    });

    const statusVia = (bin: RunningBinary, model = 'pr') =>
      new OpenAI({ baseURL: `${bin.url}/v1`, apiKey: key.key, maxRetries: 0 }).chat.completions.create({ model, messages: msg }).then(
        () => 200,
        (e: { status?: number }) => e.status ?? 0,
      );
    const listed = async (bin: RunningBinary) =>
      (
        (await (await fetch(`${bin.url}/api/api-keys`, { headers: { authorization: `Bearer ${token}` } })).json()) as Array<{
          id: string;
          spent: number;
          spend_limit: number | null;
        }>
      ).find((k) => k.id === key.id)!;
    const patch = (bin: RunningBinary, body: unknown) =>
      fetch(`${bin.url}/api/api-keys/${key.id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    test('concurrent requests through every process overspend the limit by at most one request', async () => {
      const statuses = await Promise.all(Array.from({ length: 40 }, (_, i) => statusVia(bins[i % replicas]!)));
      expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
      const ok = statuses.filter((s) => s === 200).length;
      // Every answered request's usage row is committed once the listed amount stops moving up to it.
      await waitFor(async () => Math.abs((await listed(first)).spent - ok * PER_REQUEST) < 1e-9, 'spent equals the answered requests');
      const spent = (await listed(second)).spent;
      console.log(`${ok} of 40 concurrent requests answered; spent ${spent} of a ${LIMIT} limit`);
      expect(spent).toBeLessThanOrEqual(LIMIT + PER_REQUEST + 1e-9);
      expect(statuses).toContain(402);
      // Spent is at the limit (or one request past it): both processes refuse now.
      if (spent >= LIMIT) for (const bin of bins) expect(await statusVia(bin)).toBe(402);
    });

    const grantsOfKey = () => sql<Array<{ holder: string; amount: string; expired: boolean }>>`
    select holder, amount_micros::text as amount, expires_at < now() as expired from key_spend_grants where key_id = ${key.id}`;
    /** Sends requests one at a time through `bin` until one is refused; answers the last status. */
    const spendUntilRefused = async (bin: RunningBinary) => {
      for (let i = 0; i < 100; i++) {
        const status = await statusVia(bin);
        if (status !== 200) return status;
      }
      return 200;
    };

    test('a limit lowered on one process is refused at once by the others, whose grants covered more', async () => {
      const spent = (await listed(first)).spent;
      expect((await patch(first, { spend_limit: spent + 10 })).status).toBe(200);
      for (const bin of bins.slice(1)) expect(await statusVia(bin)).toBe(200);
      // Each of the others now holds a grant with room for more requests than the new limit leaves.
      const held = (await grantsOfKey()).filter((g) => BigInt(g.amount) > 1_000_000n);
      expect(held.length).toBeGreaterThanOrEqual(replicas - 1);
      const now = (await listed(first)).spent;
      expect((await patch(first, { spend_limit: now })).status).toBe(200);
      for (const bin of bins.slice(1)) expect(await statusVia(bin)).toBe(402);
    });

    // With three processes: the third is killed, the first two still serve the test after this one.
    if (replicas === 3)
      test("a killed process's grant holds its share back until its TTL lapses; then the others spend it", async () => {
        // The others give their idle grants back after a second.
        await waitFor(async () => (await grantsOfKey()).length === 0, 'idle grants given back', { timeoutMs: 10_000 });
        const limit = Math.round(((await listed(first)).spent + 1) * 10) / 10;
        expect((await patch(first, { spend_limit: limit })).status).toBe(200);
        const victim = bins[replicas - 1]!;
        expect(await statusVia(victim)).toBe(200);
        const [grant] = (await grantsOfKey()).sort((x, y) => Number(y.amount) - Number(x.amount));
        // Asked: 0.1 for the request plus half of the 0.9 left as headroom; 0.1 of it spent since.
        expect(BigInt(grant!.amount)).toBeGreaterThanOrEqual(300_000n);
        const share = Number(grant!.amount) / 1e6;
        await victim.stop('SIGKILL');
        expect(await spendUntilRefused(first)).toBe(402);
        expect((await listed(first)).spent).toBeLessThanOrEqual(limit - share + PER_REQUEST + 1e-9);
        await waitFor(async () => (await grantsOfKey()).some((g) => g.expired), 'the dead process grant expired', { timeoutMs: 10_000 });
        expect(await spendUntilRefused(first)).toBe(402);
        const spent = (await listed(first)).spent;
        expect(spent).toBeGreaterThanOrEqual(limit - 1e-9);
        expect(spent).toBeLessThanOrEqual(limit + PER_REQUEST + 1e-9);
      }, 60_000);

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

/**
 * Money under faults, through the gateway on real PostgreSQL: a row the database cannot hold
 * among good ones, the image-part overspend, and the database unreachable under load. After each:
 * every balance equals its ledger, usage rows equal answered requests, no 402 with a positive balance.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createProxiedTestDatabase, type TcpProxy } from '../../support/tcp-proxy';
import type { TestDatabase } from '../../support/db';
import { fundedUser, type Harness, startHarness, waitFor } from '../gateway/gateway-harness';

// 1000 per million tokens: one token costs 1000 micro-units.
const PRICE = 1000;

let h: Harness;
let testDb: TestDatabase;
let proxy: TcpProxy;

beforeAll(async () => {
  // The app reaches PostgreSQL through a TCP proxy, so a test can make it unreachable.
  const made = await createProxiedTestDatabase(10);
  ({ direct: testDb, proxy } = made);
  h = await startHarness({ testDb: made.proxied });
  await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: PRICE }]);
});
afterAll(async () => {
  await h.close();
  await h.up.close();
  await proxy.close();
  await testDb.drop();
});

/** The invariants every fault test ends with. */
async function expectBooksBalanced() {
  const direct = testDb.database;
  const mismatched = await direct.query(sql`
    select w.user_id from wallets w left join (select user_id, sum(amount_micros) as s from wallet_transactions group by user_id) t using (user_id)
    where w.balance_micros <> coalesce(t.s, 0)`);
  expect(mismatched).toEqual([]);
  const unbilled = await direct.query(sql`
    select u.id from router_usage u left join wallet_transactions t on t.reference = 'usage:' || u.id
    where u.user_id is not null and u.cost_micros > 0 and t.id is null`);
  expect(unbilled).toEqual([]);
}

const ask = (client: Awaited<ReturnType<typeof fundedUser>>['client'], content: unknown, extra: Record<string, unknown> = {}) =>
  client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: content as string }], ...extra }).then(
    () => 200,
    (e) => e.status as number,
  );

const usageCount = async (userId: string, status = 200) =>
  (await testDb.database.query<{ n: number }>(sql`select count(*)::int as n from router_usage where user_id = ${userId} and status = ${status}`))[0]!.n;

describe('usage under faults (postgres)', () => {
  test('a row the database cannot hold is set aside with its reason and not answered; the other requests are answered and billed', async () => {
    h.up.set((body) => (body.messages[0].content === 'poison' ? { promptTokens: 3_000_000_000 } : {}));
    const poisoner = await fundedUser(h, 1_000_000n);
    const other = await fundedUser(h, 1_000_000n);
    const [poisoned, ...rest] = await Promise.all([ask(poisoner.client, 'poison'), ...Array.from({ length: 30 }, () => ask(other.client, 'hi'))]);
    expect(poisoned).toBe(503);
    expect(rest.every((s) => s === 200)).toBe(true);
    // Each good request: 10 prompt + 5 completion tokens.
    expect(await other.balance()).toBe(1_000_000n - 30n * 15n * 1000n);
    expect(await usageCount(other.user.id)).toBe(30);
    expect(await poisoner.balance()).toBe(1_000_000n);
    const setAside = await testDb.database.query<{ user_id: string; reason: string; row: { prompt_tokens: number } }>(
      sql`select user_id, reason, row from router_usage_set_aside`,
    );
    expect(setAside).toHaveLength(1);
    expect(setAside[0]).toMatchObject({ user_id: poisoner.user.id, row: { prompt_tokens: 3_000_000_000 } });
    expect(setAside[0]!.reason).toMatch(/out of range/);
    // The writer is not stuck: a later request of the same user is billed.
    expect(await ask(poisoner.client, 'hi')).toBe(200);
    expect(await poisoner.balance()).toBe(1_000_000n - 15_000n);
    await expectBooksBalanced();
    h.up.reset();
  });

  test('image parts count in the upper bound: 20 parallel requests on a balance below one request cost one request, not seven', async () => {
    // The upstream counts 1000 prompt tokens for the image; the body is a few hundred bytes.
    h.up.set({ promptTokens: 1000 });
    const u = await fundedUser(h, 1_000_000n);
    const content = [
      { type: 'text', text: 'what is this?' },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
    ];
    const results = await Promise.all(Array.from({ length: 20 }, () => ask(u.client, content, { max_tokens: 5 })));
    expect(results.filter((s) => s === 200)).toHaveLength(1);
    expect(results.filter((s) => s === 402)).toHaveLength(19);
    // One request: 1000 prompt + 5 completion tokens.
    expect(await u.balance()).toBe(1_000_000n - 1_005_000n);
    expect(await usageCount(u.user.id)).toBe(1);
    await expectBooksBalanced();
    h.up.reset();
  });

  test('a usage commit whose acknowledgement is lost is replayed: every request billed exactly once, the rollups counted once', async () => {
    const u = await fundedUser(h, 100_000_000n);
    expect(await ask(u.client, 'hi')).toBe(200);
    proxy.loseNextCommitAck();
    const results = await Promise.all(Array.from({ length: 20 }, () => ask(u.client, 'hi')));
    expect(proxy.lostAcks).toBe(1);
    expect(results.every((s) => s === 200)).toBe(true);
    expect(await usageCount(u.user.id)).toBe(21);
    expect(await u.balance()).toBe(100_000_000n - 21n * 15_000n);
    const [daily] = await testDb.database.query<{ requests: number }>(sql`select sum(requests)::int as requests from router_usage_daily where user_id = ${u.user.id}`);
    expect(daily!.requests).toBe(21);
    await expectBooksBalanced();
  });

  test('PostgreSQL unreachable for a while under load: requests wait for their commit and every answer is billed once it is back', async () => {
    const u = await fundedUser(h, 100_000_000n);
    // Admit once so this process holds a grant: admission then needs no round trip during the outage.
    expect(await ask(u.client, 'hi')).toBe(200);
    const before = h.up.requests.length;
    proxy.cut();
    let load: Promise<number[]>;
    try {
      load = Promise.all(Array.from({ length: 40 }, () => ask(u.client, 'hi')));
      // Answered by the upstream, and still nothing committed: those answers wait for the database.
      await waitFor(() => h.up.requests.length >= before + 5, 'answers from the upstream');
      expect(await usageCount(u.user.id)).toBe(1);
    } finally {
      proxy.restore();
    }
    const results = await load;
    const answered = results.filter((s) => s === 200).length + 1;
    expect(results.filter((s) => s === 402)).toEqual([]);
    expect(await usageCount(u.user.id)).toBe(answered);
    expect(await u.balance()).toBe(100_000_000n - BigInt(answered) * 15_000n);
    await expectBooksBalanced();
  });
});

/**
 * Replica membership and shared rate limits, in process: three memberships on one PostgreSQL
 * database and one manual clock stand for three `cpd serve` processes (joinMembership's timer only
 * calls beat(); here the test calls it). The limiters divide every limit by the live count.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createMembership, LIVE_AFTER_MS, type Membership } from '../../../src/modules/replicas';
import { namedLimiter, TokenBucketLimiter } from '../../../src/platform/http/rate-limit';
import { createTestContext, type TestContext } from '../../support/app';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { HOUR, manualClock } from '../../support/clock';

/** How many takes of `key` are admitted in a row, up to `max`. */
function admitted(limiter: TokenBucketLimiter, key: string, max = 1000): number {
  let n = 0;
  while (n < max && limiter.take(key) === 0) n++;
  return n;
}

describe('replica membership shares the rate limits', () => {
  const clock = manualClock(Date.parse('2026-11-23T12:00:00Z'));
  let testDb: TestDatabase;
  let contexts: TestContext[];
  let a: Membership;
  let b: Membership;
  let c: Membership;
  let gateway: TokenBucketLimiter;
  const rows = async () =>
    (await testDb.database.query<{ id: string }>(sql`select id from cpd_replicas order by id`)).map((r) => r.id).sort();

  beforeAll(async () => {
    testDb = await createTestDatabase('postgres');
    contexts = await Promise.all([0, 1, 2].map(() => createTestContext('postgres', { RATE_LIMITS: 'gateway=30/1h' }, { clock, testDb })));
    [a, b, c] = contexts.map((tc) => createMembership(tc.ctx)) as [Membership, Membership, Membership];
    contexts[0]!.ctx.replicas = a;
    gateway = namedLimiter(contexts[0]!.ctx, 'gateway');
  });
  afterAll(async () => {
    for (const tc of contexts) await tc.close();
    await testDb.drop();
  });

  test('alone, a replica admits the whole limit', async () => {
    await a.beat();
    expect(a.live).toBe(1);
    expect(await rows()).toEqual([a.id]);
    expect(admitted(gateway, 'alone')).toBe(30);
  });

  test('membership 1 → 3: capacity ÷ 3, refill ÷ 3, and a half-used bucket keeps its half', async () => {
    expect(admitted(gateway, 'half', 15)).toBe(15);
    await b.beat();
    await c.beat();
    expect(a.live).toBe(1); // not until its own next beat
    await a.beat();
    expect([a.live, b.live, c.live]).toEqual([3, 2, 3]);
    expect(await rows()).toEqual([a.id, b.id, c.id].sort());
    expect(admitted(gateway, 'fresh')).toBe(10);
    expect(admitted(gateway, 'half')).toBe(5);
    // The share refills 10 per hour: one request every 6 minutes, which Retry-After says.
    expect(gateway.take('fresh')).toBe(360);
    clock.advance(360_000);
    expect(admitted(gateway, 'fresh')).toBe(1);
  });

  test('a replica whose heartbeat lapses gives its share back; one that leaves gives it at once', async () => {
    for (const m of [b, c, a]) await m.beat();
    expect(a.live).toBe(3);
    clock.advance(LIVE_AFTER_MS - 1);
    await a.beat();
    expect(a.live).toBe(3); // c's last beat is still within the window
    await b.beat();
    clock.advance(2);
    await a.beat();
    expect(a.live).toBe(2); // c stopped beating (killed): lapsed
    expect(admitted(gateway, 'after-lapse')).toBe(15);
    await b.leave();
    expect(await rows()).toEqual([a.id, c.id].sort()); // a lapsed row stays until it is an hour old
    await a.beat();
    expect(a.live).toBe(1);
    expect(admitted(gateway, 'after-leave')).toBe(30);
  });

  test('rows of replicas gone for an hour are deleted by the next beat', async () => {
    clock.advance(HOUR);
    await a.beat();
    expect(await rows()).toEqual([a.id]);
  });
});

describe('TokenBucketLimiter shared by N replicas', () => {
  test('a limit smaller than the replica count admits one request per replica, never none', () => {
    const replicas = { live: 4 };
    const limiter = new TokenBucketLimiter({ capacity: 2, refillPerSec: 2 / 60 }, () => 0, 1000, replicas);
    expect(admitted(limiter, 'k')).toBe(1);
    // Retry-After: 4 tokens of the whole limit at 2 per minute.
    expect(limiter.take('k')).toBe(120);
  });

  test('a refund gives back one request of the share', () => {
    const replicas = { live: 3 };
    const limiter = new TokenBucketLimiter({ capacity: 6, refillPerSec: 6 / 3600 }, () => 0, 1000, replicas);
    expect(admitted(limiter, 'k')).toBe(2);
    limiter.refund('k');
    expect(admitted(limiter, 'k')).toBe(1);
  });
});

/**
 * What a named rate limit shared by every replica costs per request (issue 18), in one run on a
 * real PostgreSQL test database, each option against today's in-process token bucket:
 *  1. in-process token bucket (TokenBucketLimiter.take) alone (one process, share = 1) and as a
 *     per-replica share (3 live replicas: every take costs 3 tokens of the whole limit), what
 *     `cpd serve` on PostgreSQL runs per request;
 *  2. the share's upkeep: the membership's heartbeat (modules/replicas: one statement that
 *     upserts this replica's row in cpd_replicas and counts the live ones), once per 2 s per
 *     replica, not per request;
 *  3. a PostgreSQL counter: one prepared `INSERT … ON CONFLICT DO UPDATE … RETURNING` per request
 *     (fixed window per key), over 1,000 client keys and on ONE hot key (a client over its limit,
 *     the case a limit exists for: every request waits for the same row lock);
 *  4. a bare `SELECT 1` round trip, the floor of anything that asks the database per request.
 * Sides are interleaved in rounds so the machine's drifting load is shared; CONCURRENCY requests
 * in flight (default 16) on pools of the same size.
 *
 *   bun bench/rate-limit-shared.ts          (REQUESTS=40000 CONCURRENCY=32 to vary)
 */
import postgres from 'postgres';
import { createMembership } from '../src/modules/replicas';
import { DEFAULT_MAX_KEYS, TokenBucketLimiter } from '../src/platform/http/rate-limit';
import { createTestContext } from '../tests/support/app';
import { createTestDatabase } from '../tests/support/db';

const REQUESTS = Number(process.env.REQUESTS ?? 20_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);
const KEYS = 1_000;
const ROUNDS = 10;

async function timedPool(n: number, concurrency: number, job: (i: number) => Promise<unknown> | unknown): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await job(next++);
    }),
  );
  return performance.now() - start;
}

const testDb = await createTestDatabase('postgres');
const pg = postgres(testDb.url!, { max: CONCURRENCY, onnotice: () => {} });
const replicaContexts = await Promise.all([0, 1, 2].map(() => createTestContext('postgres', {}, { testDb })));
try {
  await pg`create table bench_rate_counter (key text not null, window_start bigint not null, n integer not null, primary key (key, window_start))`;
  const windowOf = () => Math.floor(Date.now() / 60_000);
  const counter = (key: string) =>
    pg.unsafe(
      'insert into bench_rate_counter (key, window_start, n) values ($1, $2, 1) on conflict (key, window_start) do update set n = bench_rate_counter.n + 1 returning n',
      [key, String(windowOf())],
      { prepare: true },
    );
  const members = replicaContexts.map((tc) => createMembership(tc.ctx));
  const heartbeat = (i: number) => members[i % members.length]!.beat();
  const ping = () => pg.unsafe('select 1', [], { prepare: true });
  // capacity high enough that every take succeeds: the cost of admitting, as on the hot path.
  const bucket = new TokenBucketLimiter({ capacity: 1e12, refillPerSec: 1e9 });
  const shared = new TokenBucketLimiter({ capacity: 1e12, refillPerSec: 1e9 }, undefined, DEFAULT_MAX_KEYS, { live: 3 });

  await timedPool(2_000, CONCURRENCY, (i) => counter(`warm${i % KEYS}`));
  await timedPool(500, CONCURRENCY, () => ping());
  await timedPool(200, 1, (i) => heartbeat(i));

  const per = Math.ceil(REQUESTS / ROUNDS);
  const t = { memory: 0, shared: 0, spread: 0, hot: 0, ping: 0, heartbeat: 0 };
  for (let r = 0; r < ROUNDS; r++) {
    const base = r * per;
    t.memory += await timedPool(per, CONCURRENCY, (i) => bucket.take(`k${(base + i) % KEYS}`));
    t.shared += await timedPool(per, CONCURRENCY, (i) => shared.take(`k${(base + i) % KEYS}`));
    t.ping += await timedPool(per, CONCURRENCY, () => ping());
    t.spread += await timedPool(per, CONCURRENCY, (i) => counter(`k${(base + i) % KEYS}`));
    t.hot += await timedPool(per, CONCURRENCY, () => counter('one-client'));
    t.heartbeat += await timedPool(20, 1, (i) => heartbeat(i));
  }
  const n = per * ROUNDS;
  const us = (ms: number, count = n) => (ms * 1000) / count;
  const line = (name: string, ms: number, count = n) =>
    console.log(`${name.padEnd(52)} ${us(ms, count).toFixed(2).padStart(9)} µs/request  ${String(Math.round((count / ms) * 1000)).padStart(8)}/s`);
  console.log(`${n} requests per side, concurrency ${CONCURRENCY}, PostgreSQL on ${new URL(testDb.url!).host}`);
  line('in-process token bucket, alone (share = 1)', t.memory);
  line('in-process token bucket, per-replica share (÷ 3)', t.shared);
  line('SELECT 1 round trip (floor of a per-request query)', t.ping);
  line('PostgreSQL counter, 1,000 keys', t.spread);
  line('PostgreSQL counter, one hot key', t.hot);
  const beat = us(t.heartbeat, 20 * ROUNDS);
  console.log(`${'share upkeep: membership heartbeat (upsert + count)'.padEnd(52)} ${beat.toFixed(2).padStart(9)} µs/beat (one writer)`);
  console.log(`ratio (per-replica share ÷ alone, time per request):              ${(t.shared / t.memory).toFixed(2)}`);
  console.log(`ratio (PostgreSQL counter ÷ in-process throughput), 1,000 keys: ${(t.memory / t.spread).toFixed(4)}`);
  console.log(`ratio (PostgreSQL counter ÷ in-process throughput), one key:    ${(t.memory / t.hot).toFixed(4)}`);
  console.log(`ratio (PostgreSQL counter ÷ SELECT 1 throughput), 1,000 keys:  ${(t.ping / t.spread).toFixed(2)}`);
  console.log(`share upkeep per request at 100 req/s per replica and a 2 s heartbeat: ${(beat / 200).toFixed(3)} µs`);
} finally {
  for (const tc of replicaContexts) await tc.close();
  await pg.end();
  await testDb.drop();
}

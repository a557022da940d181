/**
 * The API key spend limit's cost per request on PostgreSQL (no HTTP, no upstream): admission of the
 * key, then the request's usage commit (row, rollups, debit, grants) and the release, through
 *   none     a key without a spend limit (the baseline: no spend check at all)
 *   grants   a key with a spend limit, admitted against this process's grant of its budget (what
 *            the gateway does now: a database round trip only to renew the grant)
 *   per-txn  the former design, replayed here: a key without a spend limit plus, per request, one
 *            transaction taking the key's advisory lock, reading its spend and holds and inserting
 *            a hold, and the holds deleted after the commits (batched per event-loop turn)
 * Reports per path the admission's p50/p99, the whole request's p50, this process's CPU time per
 * request and the ratios to `none`; the paths alternate within one run, so machine load hits
 * them alike.
 *
 *   bun bench/key-admission.ts      (N=2000 requests per round, C=1,16 concurrency, ROUNDS=3)
 */
import { sql } from 'drizzle-orm';
import { buildApp } from '../src/app';
import { createKeyLimits } from '../src/modules/metering/metering.key-limits';
import { createUsageWriter, type UsageRecord } from '../src/modules/metering/metering.usage';
import { newId } from '../src/platform/ids';
import { createTestContext } from '../tests/support/app';

const N = Number(process.env.N ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const CONCURRENCY = (process.env.C ?? '1,16').split(',').map(Number);
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

const tc = await createTestContext('postgres', { LOG_LEVEL: 'warn' });
const { ctx } = tc;
const { services } = await buildApp(ctx);
const user = await services.accounts.createUser({ email: 'bench@example.com', password: 'bench-password-123' });
await services.billing.credit(ctx.database.db, {
  userId: user.id,
  type: 'adjustment',
  amountMicros: 1_000_000_000_000n,
  reference: 'bench',
  description: 'bench funds',
});
const policy = { isModel: () => true, spentBy: async () => new Map() };
const limited = await services.accounts.createApiKey(user.id, { name: 'limited', spend_limit: 1_000_000, spend_period: 'month' }, policy);
const plain = await services.accounts.createApiKey(user.id, { name: 'plain' }, policy);

// A key's first use fills the accounts cache its limits are read from at admission.
for (const k of [limited, plain]) await services.accounts.resolver.callerForKey(k.key);

const holder = newId('proc');
const keyLimits = createKeyLimits(ctx, services.accounts.keyLimitsOf, { holder, grantTtlMs: 30_000, waitMs: 10_000 });
const usage = createUsageWriter(ctx, services.billing, holder, () => {}, keyLimits, { synchronousCommit: false });

// The former design's table and statements, as they were, for the per-txn path.
await ctx.database.query(
  sql`create table bench_key_holds (id text primary key, key_id text not null, micros bigint not null, expires_at timestamptz not null)`,
);
await ctx.database.query(sql`create index on bench_key_holds (key_id)`);
const toRelease: string[] = [];
function releaseQueued() {
  const ids = toRelease.splice(0);
  if (!ids.length) return;
  void ctx.database.db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('synchronous_commit', 'off', true)`);
    await tx.execute(sql`delete from bench_key_holds where id in ${sql.raw(`(${ids.map((id) => `'${id}'`).join(',')})`)}`);
  });
}
async function formerHold(keyId: string, limit: bigint, estimate: bigint): Promise<() => void> {
  const id = newId('hold');
  const since = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1)).toISOString();
  const admitted = await ctx.database.db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('synchronous_commit', 'off', true), pg_advisory_xact_lock(${0x6b6579}, hashtext(${keyId}))`);
    const live = sql`key_id = ${keyId} and expires_at > now()`;
    const spent = sql`(select coalesce(sum(cost_micros), 0) from router_usage_key_daily where key_id = ${keyId} and day >= ${since}::timestamptz)`;
    const held = sql`(select coalesce(sum(micros), 0) from bench_key_holds where ${live})`;
    const rows = await ctx.database.query(
      sql`insert into bench_key_holds (id, key_id, micros, expires_at)
          select ${id}, ${keyId}, ${estimate}, now() + interval '15 minutes'
          where ${spent} + ${held} + ${estimate} <= ${limit} or (not exists (select 1 from bench_key_holds where ${live}) and ${spent} < ${limit})
          returning id`,
      tx,
    );
    return rows.length > 0;
  });
  if (!admitted) throw new Error('refused');
  return () => {
    toRelease.push(id);
    if (toRelease.length === 1) setImmediate(releaseQueued);
  };
}

const COST = 14n;
const ESTIMATE = 40n;
const row = (keyId: string): UsageRecord => ({
  id: newId('use'),
  createdAt: new Date(),
  userId: user.id,
  keyId,
  entrypoint: 'bench',
  model: 'bench',
  backend: 'http://bench.invalid',
  promptTokens: 12,
  completionTokens: 16,
  cachedTokens: 0,
  reasoningTokens: 0,
  costMicros: COST,
  costUsdMicros: COST,
  tokensCounted: true,
  clamped: false,
  latencyMs: 1,
  status: 200,
  streamed: false,
  aborted: false,
  requestId: null,
});

type Path = 'none' | 'grants' | 'per-txn';
const PATHS: Path[] = ['none', 'grants', 'per-txn'];

async function request(path: Path): Promise<number> {
  const s = performance.now();
  let release: () => void = () => {};
  if (path === 'grants') {
    const ticket = await keyLimits.admit(await keyLimits.allowed(limited.id, 'bench'), { estimate: ESTIMATE, minimum: ESTIMATE });
    release = () => ticket!.release();
  } else {
    await keyLimits.admit(await keyLimits.allowed(plain.id, 'bench'), { estimate: ESTIMATE, minimum: ESTIMATE });
    if (path === 'per-txn') release = await formerHold(plain.id, 1_000_000_000_000n, ESTIMATE);
  }
  const admitted = performance.now() - s;
  const outcome = await usage.record(row(path === 'grants' ? limited.id : plain.id));
  if (outcome !== 'written') throw new Error(`row ${outcome}`);
  release();
  return admitted;
}

async function round(path: Path, concurrency: number, n: number) {
  const admit: number[] = [];
  const whole: number[] = [];
  let next = 0;
  const cpu0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) {
        const s = performance.now();
        admit.push(await request(path));
        whole.push(performance.now() - s);
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return { admitP50: pct(admit, 50), admitP99: pct(admit, 99), wholeP50: pct(whole, 50), cpuMs: (cpu.user + cpu.system) / 1000 / n };
}

console.log(`load average ${(await Bun.file('/proc/loadavg').text()).split(' ').slice(0, 3).join(' ')}`);
for (const c of CONCURRENCY) {
  for (const path of PATHS) await round(path, c, 200); // warm-up
  const acc = Object.fromEntries(PATHS.map((p) => [p, [] as Array<Awaited<ReturnType<typeof round>>>]));
  for (let r = 0; r < ROUNDS; r++) for (const path of PATHS) acc[path]!.push(await round(path, c, N));
  const med = (path: Path, f: (x: Awaited<ReturnType<typeof round>>) => number) => pct(acc[path]!.map(f), 50);
  for (const path of PATHS) {
    const ratio = (f: (x: Awaited<ReturnType<typeof round>>) => number) => (med(path, f) / med('none', f)).toFixed(2);
    console.log(
      `c=${String(c).padEnd(2)} ${path.padEnd(7)} admission p50 ${med(path, (x) => x.admitP50).toFixed(3)} ms  p99 ${med(path, (x) => x.admitP99).toFixed(3)} ms  ` +
        `request p50 ${med(path, (x) => x.wholeP50).toFixed(3)} ms (×${ratio((x) => x.wholeP50)} of none)  ` +
        `cpu ${med(path, (x) => x.cpuMs).toFixed(3)} ms/request (×${ratio((x) => x.cpuMs)} of none)  (median of ${ROUNDS})`,
    );
  }
}
await usage.close(5_000);
await keyLimits.close();
await tc.close();
process.exit(0);

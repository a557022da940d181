/**
 * The usage writer alone on PostgreSQL (no HTTP, no upstream): one billed usage row after another
 * (c=1, each its own batch) and 64 at a time (group commit), through
 *   transaction  drizzle's transaction (BEGIN, the statements, COMMIT: three round trips)
 *   pipelined    platform/db's pipelined transaction (one round trip), what the writer uses
 * each with synchronous_commit on and off. Reports the commit's p50/p99 and this process's CPU
 * time per row; the two paths alternate within one run, so machine load hits both alike.
 *
 *   bun bench/usage-commit.ts        (N=2000 rows per c=1 round, ROUNDS=3)
 */
import { createBillingService } from '../src/modules/billing';
import { createUsageWriter, type UsageRecord } from '../src/modules/metering/metering.usage';
import { newId } from '../src/platform/ids';
import { createTestContext } from '../tests/support/app';

const N = Number(process.env.N ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

const tc = await createTestContext('postgres', { LOG_LEVEL: 'warn' });
const billing = createBillingService(tc.ctx);
const user = newId('usr');
await tc.ctx.database.query((await import('drizzle-orm')).sql`insert into users (id, email, password_hash) values (${user}, 'bench@example.com', 'x')`);
await billing.credit(tc.ctx.database.db, { userId: user, type: 'adjustment', amountMicros: 1_000_000_000_000n, reference: 'bench', description: 'bench funds' });

const database = tc.ctx.database;
const pipelined = database.pipelined.bind(database);
const paths = {
  transaction: <T>(fn: (on: never) => Promise<T>) => database.db.transaction(fn as never) as Promise<T>,
  pipelined,
};

const row = (): UsageRecord => ({
  id: newId('use'),
  createdAt: new Date(),
  userId: user,
  keyId: null,
  entrypoint: 'bench',
  model: 'bench',
  backend: 'http://bench.invalid',
  promptTokens: 12,
  completionTokens: 16,
  cachedTokens: 0,
  reasoningTokens: 0,
  costMicros: 14n,
  costUsdMicros: 14n,
  tokensCounted: true,
  clamped: false,
  latencyMs: 1,
  status: 200,
  streamed: false,
  aborted: false,
  requestId: null,
});

async function round(path: keyof typeof paths, synchronousCommit: boolean, concurrency: number, n: number) {
  database.pipelined = paths[path] as typeof database.pipelined;
  const writer = createUsageWriter(tc.ctx, billing, 'bench-holder', () => {}, { consume: () => null, committed: () => {} }, { synchronousCommit });
  const lat: number[] = [];
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) {
        const s = performance.now();
        const outcome = await writer.record(row());
        if (outcome !== 'written') throw new Error(`row ${outcome}`);
        lat.push(performance.now() - s);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { p50: pct(lat, 50), p99: pct(lat, 99), rps: n / seconds, cpuMs: (cpu.user + cpu.system) / 1000 / n };
}

console.log(`load average ${(await Bun.file('/proc/loadavg').text()).split(' ').slice(0, 3).join(' ')}`);
for (const [c, n] of [
  [1, N],
  [64, N * 5],
] as const) {
  for (const sync of [true, false]) {
    const acc: Record<string, Array<Awaited<ReturnType<typeof round>>>> = { transaction: [], pipelined: [] };
    await round('pipelined', sync, c, 200); // warm-up
    await round('transaction', sync, c, 200);
    for (let r = 0; r < ROUNDS; r++) for (const path of ['transaction', 'pipelined'] as const) acc[path]!.push(await round(path, sync, c, n));
    for (const path of ['transaction', 'pipelined'] as const) {
      const rs = acc[path]!;
      const med = (f: (x: (typeof rs)[number]) => number) => pct(rs.map(f), 50).toFixed(3);
      console.log(
        `c=${String(c).padEnd(2)} synchronous_commit ${sync ? 'on ' : 'off'} ${path.padEnd(11)} p50 ${med((x) => x.p50)} ms  p99 ${med((x) => x.p99)} ms  ${med((x) => x.rps)} rows/s  cpu ${med((x) => x.cpuMs)} ms/row (median of ${ROUNDS})`,
      );
    }
  }
}
database.pipelined = pipelined;
await tc.close();
process.exit(0);

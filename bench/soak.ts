/**
 * Soak (issue 18): the built binary `dist/cpd serve` on PostgreSQL, proxying to the fake OpenAI
 * upstream (bench/support/gateway-peer.ts), under 64 concurrent keep-alive clients for
 * SOAK_SECONDS (default 600); one request in 10 streams (20 chunks 10 ms apart), the others are
 * plain completions, each answered only after its usage row, rollups and wallet debit are
 * committed. The server's resident set (VmRSS from /proc/<pid>/status) is sampled every
 * SAMPLE_SECONDS (default 5). After WARMUP_SECONDS (default 60: JIT, connection pools, caches
 * filled) the resident set must stop growing. A single sample is as much garbage not yet collected
 * as live memory (under this load RSS swings by ~50 MB between collections), so what is compared
 * is each minute's lowest sample, the trough right after a collection: the live set and what the
 * allocator keeps. Reported: RSS at start, the peak, the minute troughs, and the least-squares
 * slope of the troughs after warm-up in MB per minute, with its standard error (the troughs still
 * scatter by ±5–10 MB, so over ten minutes a slope under about 1 MB/min is within that noise).
 * Target: last trough − first trough after warm-up ≤ 10% of the first, and no growth: a slope
 * ≤ 0.5 MB/min or not above twice its standard error. A leak of 1 promise per usage batch (fixed)
 * showed as +9 MB and 1.9 MB/min, 3 standard errors.
 *
 * SOAK_HEAP=1 runs the server from source (`bun src/main.ts serve`, not the binary) with
 * bench/support/heap-probe.ts preloaded, and also reports the live JavaScript heap after a full
 * collection at the end of warm-up and at the end, with the object types that grew: RSS troughs
 * still move by a few MB with the allocator, the live heap does not unless something leaks.
 *
 * Not part of `make bench` (it takes ten minutes): `make soak`.
 * Also reported: the server's open files after warm-up and at the end, and usage rows against
 * answered requests. USAGE_JOURNAL=on runs the server with the usage journal and reports its files
 * under load and after SIGTERM (none may be left).
 *   bun bench/soak.ts           (SOAK_SECONDS=600 CONNECTIONS=64 SOAK_HEAP=1 USAGE_JOURNAL=on; CPD_BINARY=path for another build)
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { buildApp } from '../src/app';
import { createTestContext } from '../tests/support/app';
import { baseEnv, ensureBuilt } from '../tests/support/binary';
import { createTestDatabase, type TestDatabase } from '../tests/support/db';
import { makeApiKey } from '../tests/support/make';
import { freePort } from '../tests/support/ports';
import { waitFor } from '../tests/support/wait';
import { runBench, spawnLine, track } from './support/lifecycle';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const WARMUP = Number(process.env.WARMUP_SECONDS ?? Math.min(60, SECONDS / 5));
const SAMPLE = Number(process.env.SAMPLE_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 64);
// The verdict compares minute troughs after warm-up (the first with the last, and their slope):
// a run too short to hold two of them is refused before it starts, not after it ran.
if (SECONDS < WARMUP + 120) {
  const least = process.env.WARMUP_SECONDS ? `${WARMUP + 120} s` : '150 s (the default warm-up is a fifth of the run, at most 60 s)';
  console.error(`soak: SOAK_SECONDS=${SECONDS} leaves less than two whole minutes after its ${WARMUP} s warm-up; it needs at least ${least}`);
  process.exit(2);
}
const HEAP = process.env.SOAK_HEAP === '1';
const JOURNAL = process.env.USAGE_JOURNAL === 'on';
const root = join(import.meta.dir, '..');
/** What the run made, removed at its end or when it is interrupted. */
const made: { db?: TestDatabase; cwd?: string } = {};

/** The process's resident set in bytes, from the kernel's own accounting. */
function rssOf(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (!kb) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb) * 1024;
}

/** Least-squares slope of y over x, and its standard error. */
function slope(points: Array<{ x: number; y: number }>): { slope: number; error: number } {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  const b = sxx === 0 ? 0 : points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0) / sxx;
  const residuals = points.reduce((s, p) => s + (p.y - my - b * (p.x - mx)) ** 2, 0);
  const error = n > 2 && sxx > 0 ? Math.sqrt(residuals / (n - 2) / sxx) : Number.POSITIVE_INFINITY;
  return { slope: b, error };
}

async function main() {
  const binary = await ensureBuilt();
  const { line: upstream } = await spawnLine([process.execPath, 'bench/support/gateway-peer.ts', 'upstream'], { cwd: root });

  // The key and the wallet, written through cpd's own services into a fresh PostgreSQL database.
  const testDb = await createTestDatabase('postgres');
  made.db = testDb;
  const tc = await createTestContext('postgres', { LOG_LEVEL: 'warn' }, { testDb });
  const { services } = await buildApp(tc.ctx);
  await services.pricing.setModelPrices([{ slug: 'bench', unit: 'per_million_tokens', price: 0.5 }]);
  const user = await services.accounts.createUser({ email: 'soak@example.com', password: 'soak-password' });
  const { key } = await makeApiKey({ services }, user.id);
  await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 1_000_000_000_000n, reference: 'soak', description: 'soak funds' });
  await tc.close();

  const cwd = mkdtempSync(join(tmpdir(), 'cpd-bench-soak-'));
  made.cwd = cwd;
  const port = await freePort();
  const command = HEAP ? [process.execPath, '--preload', join(root, 'bench/support/heap-probe.ts'), join(root, 'src/main.ts'), 'serve'] : [binary, 'serve'];
  const cpd = track(
    Bun.spawn(command, {
      cwd,
      env: {
        ...baseEnv(),
        HEAP_PROBE_DIR: cwd,
        DATABASE_URL: testDb.url!,
        DATA_DIR: join(cwd, 'data'),
        MODEL_BACKENDS: `bench=${upstream}`,
        RATE_LIMITS: 'gateway=100000000/1s',
        LOG_LEVEL: 'warn',
        SECRET_KEY: 'bench-secret-key-0123456789abcdef0123456789',
        PORT: String(port),
        USAGE_JOURNAL: JOURNAL ? 'on' : 'off',
      },
      stdout: 'ignore',
      stderr: 'inherit',
    }),
  );
  const healthy = () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
  await waitFor(async () => cpd.exitCode !== null || (await healthy()), 'cpd to come up', { timeoutMs: 60_000 });
  if (cpd.exitCode !== null) throw new Error(`cpd did not come up (exit ${cpd.exitCode})`);
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;

  const headers = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  const plain = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });
  const streamed = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Count.' }], stream: true });
  const started = performance.now();
  const until = started + SECONDS * 1000;
  let done = 0;
  let failed = 0;
  const samples: Array<{ x: number; y: number }> = [];
  const sample = () => samples.push({ x: (performance.now() - started) / 60_000, y: rssOf(cpd.pid) });
  const openFiles = () => readdirSync(`/proc/${cpd.pid}/fd`).length;
  const journalDir = join(cwd, 'data/journal/usage');
  const journalFiles = () => (existsSync(journalDir) ? readdirSync(journalDir).length : 0);
  let filesAtWarm = 0;
  const atWarm = setTimeout(() => (filesAtWarm = openFiles()), WARMUP * 1000);
  sample();
  const sampler = setInterval(sample, SAMPLE * 1000);
  const heapAtWarm = HEAP ? setTimeout(() => cpd.kill('SIGUSR2'), WARMUP * 1000) : null;
  let lastReport = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, lane) => {
      for (let i = lane; performance.now() < until; i += CONNECTIONS) {
        const res = await fetch(url, { method: 'POST', headers, body: i % 10 === 0 ? streamed : plain });
        const text = await res.text();
        if (res.status !== 200 || (i % 10 === 0 && !text.includes('[DONE]'))) failed++;
        done++;
        const elapsed = performance.now() - started;
        if (elapsed - lastReport >= 60_000) {
          lastReport = elapsed;
          const last = samples.at(-1)!;
          console.log(`  ${(elapsed / 60_000).toFixed(1)} min: ${done} requests, ${failed} failed, RSS ${mb(last.y)}`);
        }
      }
    }),
  );
  clearInterval(sampler);
  clearTimeout(atWarm);
  sample();
  const filesAtEnd = openFiles();
  const journalAtEnd = journalFiles();
  const seconds = (performance.now() - started) / 1000;
  if (heapAtWarm) clearTimeout(heapAtWarm);
  const heaps = HEAP ? [await heapProbe(cwd, 0), await heapProbe(cwd, 1, () => cpd.kill('SIGUSR2'))] : [];
  cpd.kill('SIGTERM');
  const code = await cpd.exited;
  const journalAfterStop = journalFiles();
  const [usage] = await testDb.database.query<{ n: number }>(sql`select count(*)::int as n from router_usage`);

  const after = samples.filter((s) => s.x * 60 >= WARMUP);
  const troughs = minuteTroughs(after);
  const first = troughs[0]!.y;
  const last = troughs.at(-1)!.y;
  const peak = Math.max(...samples.map((s) => s.y));
  const fit = slope(troughs);
  const perMinute = fit.slope / 2 ** 20;
  const error = fit.error / 2 ** 20;
  const grew = last - first;
  const met = grew <= first * 0.1 && (perMinute <= 0.5 || perMinute <= 2 * error);
  console.log(`soak: ${SECONDS} s at c=${CONNECTIONS} (1 in 10 streamed), ${done} requests (${(done / seconds).toFixed(0)} req/s), ${failed} failed; exit code ${code}`);
  console.log(`  RSS at start ${mb(samples[0]!.y)}, peak ${mb(peak)}; after ${WARMUP} s warm-up, each minute's lowest sample: ${troughs.map((t) => mb(t.y)).join(', ')}`);
  console.log(`  troughs: first ${mb(first)}, last ${mb(last)} (${grew >= 0 ? '+' : ''}${mb(grew)}), slope ${perMinute.toFixed(2)} ± ${error.toFixed(2)} MB/min  (target: growth ≤ 10%, slope ≤ 0.5 MB/min or ≤ 2 standard errors: ${met ? 'met' : 'MISSED'})`);
  console.log(`  open files of the server: ${filesAtWarm} after warm-up, ${filesAtEnd} at the end; usage rows ${usage!.n} for ${done - failed} answered requests`);
  if (JOURNAL) console.log(`  usage journal (USAGE_JOURNAL=on): ${journalAtEnd} files under load at the end, ${journalAfterStop} after SIGTERM`);
  if (heaps.length === 2) {
    const [warmHeap, endHeap] = heaps as [HeapProbe, HeapProbe];
    const types = Object.keys({ ...warmHeap.counts, ...endHeap.counts });
    const grew = types
      .map((t) => ({ t, d: (endHeap.counts[t] ?? 0) - (warmHeap.counts[t] ?? 0) }))
      .filter((x) => x.d > 0)
      .sort((a, b) => b.d - a.d)
      .slice(0, 5);
    console.log(`  live JS heap after a full collection: ${mb(warmHeap.heapSize)}, ${warmHeap.objectCount} objects after warm-up; ${mb(endHeap.heapSize)}, ${endHeap.objectCount} objects at the end`);
    console.log(`  object types that grew most: ${grew.map((x) => `${x.t} +${x.d}`).join(', ') || 'none'}`);
  }
  if (failed || code !== 0) throw new Error(`${failed} failed requests; cpd exit code ${code}`);
  if (usage!.n !== done || journalAfterStop !== 0) throw new Error(`${usage!.n} usage rows for ${done} answered requests; ${journalAfterStop} journal files left`);
}

interface HeapProbe {
  heapSize: number;
  objectCount: number;
  counts: Record<string, number>;
}

/** The heap probe's n-th snapshot, after `trigger` (if any) asked for it. */
async function heapProbe(dir: string, n: number, trigger?: () => void): Promise<HeapProbe> {
  trigger?.();
  const file = join(dir, `heap-${n}.json`);
  const deadline = Date.now() + 30_000;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`no heap snapshot ${n}`);
    await Bun.sleep(100);
  }
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** The lowest sample of each minute after warm-up; a minute with under half its samples is left out. */
function minuteTroughs(points: Array<{ x: number; y: number }>): Array<{ x: number; y: number }> {
  const minutes = new Map<number, Array<{ x: number; y: number }>>();
  for (const p of points) minutes.set(Math.floor(p.x), [...(minutes.get(Math.floor(p.x)) ?? []), p]);
  return [...minutes.values()]
    .filter((inMinute) => inMinute.length >= 30 / SAMPLE)
    .map((inMinute) => inMinute.reduce((low, p) => (p.y < low.y ? p : low)));
}

function mb(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MB`;
}

// Its processes stopped, the run's directory and database are removed (at the end, or when interrupted).
await runBench(main, async () => {
  if (made.cwd) rmSync(made.cwd, { recursive: true, force: true });
  await made.db?.drop();
});

/**
 * Gateway benchmark, one run, every server in its own process on 127.0.0.1:
 *   direct    the fake OpenAI upstream itself (bench/support/gateway-peer.ts upstream)
 *   bare      a bare Bun.serve passthrough proxy to it (the baseline for req/s)
 *   cpd       `bun src/main.ts serve` on a PostgreSQL test database: key auth, rate limit, price,
 *             wallet admission, and the usage row + rollups + wallet debit committed before each
 *             answer ends (group commit, one round trip; USAGE_SYNCHRONOUS_COMMIT=on, the default:
 *             each commit waits for the WAL flush)
 *   cpd-async the same with USAGE_SYNCHRONOUS_COMMIT=off (the commit does not wait for the flush)
 *   cpd-journal the same with USAGE_JOURNAL=on (the usage row is appended to a local journal before
 *             the answer ends and committed right after)
 *   cpd+rules the first cpd process with a key limited to models and requests per minute
 *   cpd+spend the first cpd process with a key that has a spend limit (admitted against the process's grant of its budget)
 *   portkey   the Portkey gateway (npm @portkey-ai/gateway) with a custom host, as a peer
 * Reports: added latency (p50, p99) over direct at concurrency 1 and 64, non-streaming; req/s
 * ratio ÷ bare; each server process's CPU time per request (from /proc, so a loaded machine
 * inflates it far less than latency) and its ratio to the bare proxy's, and for cpd the CPU time
 * of every PostgreSQL process per request of the phase (the database shares the cores); SSE added
 * time-to-first-byte and inter-chunk gap for SERIAL_STREAMS streams one at a time, as many with a
 * 50 KB prompt that the upstream takes PREFILL_MS to answer (as a model's prefill), and a burst of
 * STREAMS concurrent streams, with the server's CPU per stream, and stalled streams; the
 * added p50 of each kind of key limits over the plain key. Targets: added p50 at c=1 ≤ 0.35 ms
 * (issue 18: 0.3 ms, p99 1 ms); req/s at c=64 ≥ 0.5 × bare (0.6); added TTFB p99 ≤ 2 ms; zero stalled.
 *
 *   bun bench/gateway.ts          (N1=2000 N64=20000 ROUNDS=3 WARMUP=20000 STREAMS=320 SERIAL_STREAMS=50 to change the counts;
 *                                  TARGETS=cpd,portkey to run only some servers besides direct and bare;
 *                                  PROFILE_DIR=/tmp/prof for a CPU profile of the cpd process, summarised
 *                                  by bench/support/profile-summary.ts)
 */
import { join } from 'node:path';
import { buildApp } from '../src/app';
import { createTestContext } from '../tests/support/app';
import { createTestDatabase, type TestDatabase } from '../tests/support/db';
import { makeApiKey } from '../tests/support/make';
import { freePort } from '../tests/support/ports';
import { waitFor } from '../tests/support/wait';
import { runBench, spawnLine, track } from './support/lifecycle';
import { postgresCpuMs, processCpuMs, TICK_MS } from './support/process-cpu';

const N1 = Number(process.env.N1 ?? 2000);
const N64 = Number(process.env.N64 ?? 20000);
/**
 * The non-streaming phases run in ROUNDS interleaved rounds (every server once per round, N1 or
 * N64 requests split between them): a ratio to the bare proxy is taken within each round, so the
 * machine slowing down during one server's turn moves one round's ratio, not the result.
 */
const ROUNDS = Number(process.env.ROUNDS ?? 3);
/**
 * Requests each server answers at c=64 before anything is timed. cpd's CPU per request at c=64
 * fell from 0.090–0.096 ms after 5 000 to 0.063–0.075 ms after 10 000–40 000 (JavaScriptCore's
 * optimising tiers compile on threads of the process, which its CPU time counts): the earlier 500
 * at c=16 timed a server still compiling, not the one an operator runs for days.
 */
const WARMUP = Number(process.env.WARMUP ?? 20000);
const STREAMS = Number(process.env.STREAMS ?? 320);
const SERIAL_STREAMS = Number(process.env.SERIAL_STREAMS ?? 50);
/** How long the fake upstream takes to its first byte for a long prompt (a model's prefill). */
const PREFILL_MS = 20;
/** TARGETS=cpd,cpd-async runs only those (direct and bare always run: the baselines). */
const only = process.env.TARGETS ? new Set(['direct', 'bare', ...process.env.TARGETS.split(',')]) : null;
const root = join(import.meta.dir, '..');
/** The run's database, dropped at the end (each run wrote ~100 000 usage rows into a database it left behind). */
const made: { db?: TestDatabase } = {};

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};
const f2 = (x: number) => x.toFixed(3);

/** Until `url` answers below 500 (a server coming up), with the tests' one polling helper. */
async function waitHttp(url: string, init: RequestInit = {}) {
  const answers = async () => {
    const r = await fetch(url, init);
    await r.arrayBuffer();
    return r.status < 500;
  };
  await waitFor(() => answers().catch(() => false), `${url} to come up`);
}

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** The server process behind it, for its CPU time per request (machine load does not inflate it as it does latency). */
  pid: number;
}

/**
 * Waits until PostgreSQL and every server are idle (at most one 10 ms tick of CPU between them in
 * 300 ms, or 10 s at most): what the server before left to do (autovacuum of the rows it wrote,
 * the WAL writer, checkpoints, its own garbage collection) then falls in no other server's phase.
 */
async function settle(pids: number[]): Promise<void> {
  const busy = () => postgresCpuMs() + pids.reduce((a, pid) => a + processCpuMs(pid), 0);
  const until = performance.now() + 10_000;
  let last = busy();
  while (performance.now() < until) {
    await Bun.sleep(300);
    const now = busy();
    if (now - last <= TICK_MS) return;
    last = now;
  }
}

const body = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });

/** One load phase's raw measurements (merged across rounds by `merged`). */
interface LoadRun {
  lat: number[];
  seconds: number;
  n: number;
  failed: number;
  cpuMs: number;
  dbCpuMs: number;
}

async function load(t: Target, n: number, concurrency: number): Promise<LoadRun> {
  const lat: number[] = [];
  const cpu0 = processCpuMs(t.pid);
  const db0 = postgresCpuMs();
  let next = 0;
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        next++;
        const t0 = performance.now();
        const r = await fetch(`${t.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body });
        await r.arrayBuffer();
        if (r.status !== 200) failed++;
        lat.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { lat, seconds, n, failed, cpuMs: processCpuMs(t.pid) - cpu0, dbCpuMs: postgresCpuMs() - db0 };
}

/** A server's rounds as one result: latency percentiles over every request, req/s and CPU over the whole. */
function merged(runs: LoadRun[]) {
  const lat = runs.flatMap((r) => r.lat);
  const n = runs.reduce((a, r) => a + r.n, 0);
  const seconds = runs.reduce((a, r) => a + r.seconds, 0);
  return {
    p50: pct(lat, 50),
    p99: pct(lat, 99),
    rps: n / seconds,
    failed: runs.reduce((a, r) => a + r.failed, 0),
    cpuPerRequest: runs.reduce((a, r) => a + r.cpuMs, 0) / n,
    dbCpuPerRequest: runs.reduce((a, r) => a + r.dbCpuMs, 0) / n,
  };
}

const streamBody = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Count.' }], stream: true });
/** A long prompt (~50 KB, as an agent's or a retrieval app's): the fake upstream takes PREFILL_MS before its first byte. */
const longStreamBody = JSON.stringify({
  model: 'bench',
  messages: [{ role: 'user', content: 'The quick brown fox jumps over the lazy dog while the engineers measure. '.repeat(700) }],
  stream: true,
});

/** One stream read to its end: time to its first body bytes, the gaps between reads, and whether [DONE] came. */
async function oneStream(t: Target, body = streamBody) {
  const t0 = performance.now();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 30_000);
  const gaps: number[] = [];
  let ttfb = Number.NaN;
  try {
    const r = await fetch(`${t.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body, signal: ac.signal });
    const reader = r.body!.getReader();
    let last = 0;
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const now = performance.now();
      if (last === 0) ttfb = now - t0;
      else gaps.push(now - last);
      last = now;
      text += new TextDecoder().decode(value);
    }
    return { ttfb, gaps, stalled: !text.includes('[DONE]') };
  } catch {
    return { ttfb, gaps, stalled: true };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `count` streams, `concurrency` at a time (all at once when equal), after one warm-up stream (the
 * connection, and cpd's wallet grant, which an idle wallet gives back after a second). Also the
 * server's CPU time per stream: a burst of streams queues for that CPU, which is most of its TTFB.
 */
async function sse(t: Target, count: number, concurrency: number, body = streamBody) {
  await oneStream(t, body);
  const results: Array<Awaited<ReturnType<typeof oneStream>>> = [];
  const cpu0 = processCpuMs(t.pid);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        results.push(await oneStream(t, body));
      }
    }),
  );
  const cpuPerStream = (processCpuMs(t.pid) - cpu0) / count;
  const ttfb = results.map((r) => r.ttfb).filter((x) => !Number.isNaN(x));
  const gaps = results.flatMap((r) => r.gaps);
  return { ttfb50: pct(ttfb, 50), ttfb99: pct(ttfb, 99), gap50: pct(gaps, 50), gap99: pct(gaps, 99), stalled: results.filter((r) => r.stalled).length, cpuPerStream };
}

async function main() {
  const { line: upstream, pid: upstreamPid } = await spawnLine([process.execPath, 'bench/support/gateway-peer.ts', 'upstream', String(PREFILL_MS)], { cwd: root });
  const { line: bare, pid: barePid } = await spawnLine([process.execPath, 'bench/support/gateway-peer.ts', 'bare', upstream], { cwd: root });

  // cpd's data, written through its own services into a fresh PostgreSQL database.
  const testDb = await createTestDatabase('postgres');
  made.db = testDb;
  const tc = await createTestContext('postgres', { LOG_LEVEL: 'warn' }, { testDb });
  const { services } = await buildApp(tc.ctx);
  await services.pricing.setModelPrices([{ slug: 'bench', unit: 'per_million_tokens', price: 0.5 }]);
  const user = await services.accounts.createUser({ email: 'bench@example.com', password: 'bench-password' });
  const key = await makeApiKey({ services }, user.id);
  const keyPolicy = { isModel: (m: string) => m === 'bench', spentBy: async () => new Map() };
  const rulesKey = await services.accounts.createApiKey(user.id, { name: 'rules', models: ['bench'], rpm: 100_000_000 }, keyPolicy);
  const spendKey = await services.accounts.createApiKey(user.id, { name: 'spend', spend_limit: 1_000_000, spend_period: 'month' }, keyPolicy);
  await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 1_000_000_000_000n, reference: 'bench', description: 'bench funds' });
  await tc.close();

  const cpdPort = await freePort();
  const cpdEnv = {
    DATABASE_URL: testDb.url!,
    PORT: String(cpdPort),
    HOST: '127.0.0.1',
    MODEL_BACKENDS: `bench=${upstream}`,
    RATE_LIMITS: 'gateway=100000000/1s',
    LOG_LEVEL: 'warn',
    DATA_DIR: tc.dataDir,
    SECRET_KEY: 'bench-secret-key-0123456789abcdef0123456789',
  };
  // PROFILE_DIR=/tmp/prof writes a CPU profile of the (first) cpd process there, sampled every
  // 250 µs (read it with bench/support/profile-summary.ts).
  const prof = process.env.PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-interval=250', `--cpu-prof-dir=${process.env.PROFILE_DIR}`] : [];
  /** One `cpd serve` with `env` over cpdEnv, on its own port (all on one database and DATA_DIR). */
  async function startCpd(env: Record<string, string>, flags: string[] = []): Promise<{ url: string; pid: number; proc: Bun.Subprocess }> {
    const port = await freePort();
    const proc = track(Bun.spawn([process.execPath, ...flags, 'src/main.ts', 'serve'], { cwd: root, env: { ...process.env, ...cpdEnv, ...env, PORT: String(port) }, stdout: 'ignore', stderr: 'inherit' }));
    await waitHttp(`http://127.0.0.1:${port}/healthz`);
    return { url: `http://127.0.0.1:${port}/v1`, pid: proc.pid, proc };
  }
  const cpdProcs = {
    cpd: await startCpd({}, prof),
    'cpd-async': await startCpd({ USAGE_SYNCHRONOUS_COMMIT: 'off' }),
    'cpd-journal': await startCpd({ USAGE_JOURNAL: 'on' }),
  };
  const cpd = cpdProcs.cpd.url;

  const portkeyPort = await freePort();
  const portkeyProc = track(Bun.spawn([process.execPath, 'node_modules/@portkey-ai/gateway/build/start-server.js', `--port=${portkeyPort}`, '--headless'], { cwd: root, stdout: 'ignore', stderr: 'ignore' }));
  const portkey = `http://127.0.0.1:${portkeyPort}/v1`;
  const portkeyHeaders = { authorization: 'Bearer sk-bench', 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstream };
  await waitHttp(`${portkey}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...portkeyHeaders }, body });

  const all: Target[] = [
    { name: 'direct', url: upstream, headers: {}, pid: upstreamPid },
    { name: 'bare', url: bare, headers: {}, pid: barePid },
    ...Object.entries(cpdProcs).map(([name, p]) => ({ name, url: p.url, headers: { authorization: `Bearer ${key.key}` }, pid: p.pid })),
    { name: 'cpd+rules', url: cpd, headers: { authorization: `Bearer ${rulesKey.key}` }, pid: cpdProcs.cpd.pid },
    { name: 'cpd+spend', url: cpd, headers: { authorization: `Bearer ${spendKey.key}` }, pid: cpdProcs.cpd.pid },
    { name: 'portkey', url: portkey, headers: portkeyHeaders, pid: portkeyProc.pid },
  ];
  const targets = all.filter((t) => !only || only.has(t.name));
  const serverPids = [...new Set(all.map((t) => t.pid))];
  const streamTargets = targets.filter((t) => !t.name.startsWith('cpd+'));
  for (const t of targets) await load(t, WARMUP, 64); // warm-up: JIT tiers, pools, caches

  for (const [c, n] of [
    [1, N1],
    [64, N64],
  ] as const) {
    console.log(`\nnon-streaming, concurrency ${c}, ${n} requests each in ${ROUNDS} interleaved rounds`);
    const runs: Record<string, LoadRun[]> = Object.fromEntries(targets.map((t) => [t.name, []]));
    for (let round = 0; round < ROUNDS; round++)
      for (const t of targets) {
        await settle(serverPids);
        runs[t.name]!.push(await load(t, Math.ceil(n / ROUNDS), c));
      }
    const results = Object.fromEntries(Object.entries(runs).map(([name, rs]) => [name, merged(rs)]));
    const d = results.direct!;
    for (const t of targets) {
      const r = results[t.name]!;
      const added = t.name === 'direct' ? '' : `  added p50 ${f2(r.p50 - d.p50)} ms, p99 ${f2(r.p99 - d.p99)} ms`;
      const cpu = `cpu ${f2(r.cpuPerRequest)} ms/req${t.name.startsWith('cpd') ? ` (PostgreSQL ${f2(r.dbCpuPerRequest)})` : ''}`;
      console.log(`  ${t.name.padEnd(10)} p50 ${f2(r.p50)} ms  p99 ${f2(r.p99)} ms  ${r.rps.toFixed(0).padStart(6)} req/s  ${cpu}  failed ${r.failed}${added}`);
    }
    for (const limited of ['cpd+rules', 'cpd+spend'])
      if (results[limited] && results.cpd)
        console.log(`  key limits (${limited}) added p50 over the plain key: ${f2(results[limited]!.p50 - results.cpd.p50)} ms${c === 1 ? ' (target ≤ 0.35 ms)' : ''}`);
    const others = targets.filter((t) => t.name !== 'direct' && t.name !== 'bare' && !t.name.startsWith('cpd+'));
    // The median of the rounds' ratios, each taken within its round; then every round's.
    const roundRatios = (name: string) => runs[name]!.map((r, i) => r.n / r.seconds / (runs.bare![i]!.n / runs.bare![i]!.seconds));
    const ratio = (name: string) => `${pct(roundRatios(name), 50).toFixed(2)} (${roundRatios(name).map((x) => x.toFixed(2)).join(', ')})`;
    const cpuRatio = (name: string) => (results[name]!.cpuPerRequest / results.bare!.cpuPerRequest).toFixed(1);
    console.log(`  req/s ÷ bare proxy: ${others.map((t) => `${t.name} ${ratio(t.name)}`).join(', ')} (target at c=64 ≥ 0.5, issue 18: ≥ 0.6)`);
    console.log(`  server CPU per request ÷ bare proxy's: ${others.map((t) => `${t.name} ${cpuRatio(t.name)}×`).join(', ')}`);
  }

  const streamRuns = [
    { count: SERIAL_STREAMS, concurrency: 1, body: streamBody, title: `SSE, ${SERIAL_STREAMS} streams one at a time, 20 chunks 10 ms apart` },
    {
      count: SERIAL_STREAMS,
      concurrency: 1,
      body: longStreamBody,
      title: `SSE, ${SERIAL_STREAMS} streams one at a time with a ${(longStreamBody.length / 1024).toFixed(0)} KB prompt, the upstream ${PREFILL_MS} ms to its first byte`,
    },
    { count: STREAMS, concurrency: STREAMS, body: streamBody, title: `SSE, ${STREAMS} concurrent streams of 20 chunks 10 ms apart` },
  ];
  for (const { count, concurrency, body, title } of streamRuns.filter((r) => r.count > 0)) {
    console.log(`\n${title}`);
    const streams: Record<string, Awaited<ReturnType<typeof sse>>> = {};
    for (const t of streamTargets) {
      streams[t.name] = await sse(t, count, concurrency, body);
      const s = streams[t.name]!;
      // One stream at a time, a server's CPU is mostly its event loop waking for each chunk of a 200 ms stream: not shown.
      const cpu = concurrency > 1 ? `  cpu ${f2(s.cpuPerStream)} ms/stream` : '';
      console.log(`  ${t.name.padEnd(9)} TTFB p50 ${f2(s.ttfb50)} ms p99 ${f2(s.ttfb99)} ms  gap p50 ${f2(s.gap50)} ms p99 ${f2(s.gap99)} ms${cpu}  stalled ${s.stalled}`);
    }
    const sd = streams.direct!;
    for (const name of ['bare', 'cpd', 'cpd-async', 'cpd-journal', 'portkey']) {
      const sc = streams[name];
      if (sc) console.log(`  ${name} added TTFB p50 ${f2(sc.ttfb50 - sd.ttfb50)} ms, p99 ${f2(sc.ttfb99 - sd.ttfb99)} ms${name.startsWith('cpd') ? ' (target p99 ≤ 2 ms)' : ''}; added gap p50 ${f2(sc.gap50 - sd.gap50)} ms, p99 ${f2(sc.gap99 - sd.gap99)} ms; stalled ${sc.stalled}`);
    }
  }

  for (const p of Object.values(cpdProcs)) p.proc.kill('SIGTERM');
  await Promise.all(Object.values(cpdProcs).map((p) => p.proc.exited));
  const check = await createTestContext('postgres', {}, { testDb: { ...testDb, drop: async () => {} } });
  const [row] = await check.ctx.database.query<{ n: number }>(
    (await import('drizzle-orm')).sql`select count(*)::int as n from router_usage`,
  );
  console.log(`\nusage rows written by the cpd processes (every answered request): ${row!.n}`);
  await check.close();
}

// Its processes stopped, the run's database is dropped (at the end, or when interrupted).
await runBench(main, async () => {
  await made.db?.drop();
});

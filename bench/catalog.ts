/**
 * Registry request rates (issue 4), in one run, each against a bare Bun.serve hello world measured
 * the same way (same load generator, same connection count, same duration):
 *   1. GET /api/models req/s ÷ hello                                  (target ≥ 0.7)
 *   2. authenticated download (API key, 302 to a signed link) ÷ hello  (target ≥ 0.5)
 * The load generator runs in a child process (this file in "load" mode) so it does not share the
 * server's event loop. Real PostgreSQL test database; LOG_LEVEL=warn (the test logger keeps lines
 * in memory).
 * Medians over ROUNDS interleaved rounds, after one round that warms the JIT.
 *   bun bench/catalog.ts            (SECONDS=3 ROUNDS=3 CONNECTIONS=64)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listenOptions } from '../src/platform/http/listen';
import { postgresCpuMs } from './support/process-cpu';

const SECONDS = Number(process.env.SECONDS ?? 3);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 64);

if (process.argv[2] === 'load') {
  // Child: hammer one URL with CONNECTIONS concurrent keep-alive loops; print completed req/s.
  const [, , , url, auth] = process.argv;
  const headers: Record<string, string> = auth ? { authorization: auth } : {};
  const until = performance.now() + SECONDS * 1000;
  let done = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        const res = await fetch(url!, { headers, redirect: 'manual' });
        await res.arrayBuffer();
        if (res.status >= 400) failed++;
        done++;
      }
    }),
  );
  console.log(JSON.stringify({ rps: done / SECONDS, failed }));
  process.exit(0);
}

/** Completed req/s, and this (server) process's and PostgreSQL's CPU time per completed request in µs. */
async function measure(url: string, auth?: string): Promise<{ rps: number; cpuUs: number; pgUs: number }> {
  const cpu = process.cpuUsage();
  const pg = postgresCpuMs();
  const proc = Bun.spawn([process.execPath, import.meta.path, 'load', url, ...(auth ? [auth] : [])], { stdout: 'pipe', stderr: 'inherit', env: { ...process.env, SECONDS: String(SECONDS), CONNECTIONS: String(CONNECTIONS) } });
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  const { rps, failed } = JSON.parse(out) as { rps: number; failed: number };
  if (failed) throw new Error(`${failed} failed requests against ${url}`);
  const used = process.cpuUsage(cpu);
  const requests = rps * SECONDS;
  return { rps, cpuUs: (used.user + used.system) / requests, pgUs: ((postgresCpuMs() - pg) * 1000) / requests };
}

const { createTestApp } = await import('../tests/support/app');
const { makeApiKey, makeUser } = await import('../tests/support/make');
const { publishArtifact } = await import('../src/modules/registry');

const t = await createTestApp('postgres', { RATE_LIMITS: 'download=1000000000/1s', LOG_LEVEL: 'warn' });
const dir = mkdtempSync(join(tmpdir(), 'cpd-bench-catalog-'));
// Both as a production server listens: Bun's development mode (its default, and Elysia's, unless
// NODE_ENV=production) costs about 1 µs per request; `cpd serve` turns it off (platform/http/listen.ts).
const bare = Bun.serve({ hostname: '127.0.0.1', port: 0, development: false, fetch: () => new Response('hello') });
const server = t.app.listen(listenOptions('127.0.0.1', 0));
try {
  const file = join(dir, 'model.gguf');
  writeFileSync(file, 'weights');
  for (let i = 0; i < 20; i++)
    await publishArtifact(t.ctx, t.services.store, { path: file, slug: `model-${String(i).padStart(2, '0')}`, quant: 'int4', sdk: 'v1.0', description: 'A benchmark model' });
  await t.services.registry.reload();
  const user = await makeUser(t);
  const { key } = await makeApiKey(t, user.id);
  const base = `http://127.0.0.1:${server.server!.port}`;

  // Rounds interleave the three targets so a busy machine skews them alike; ratios are per round.
  type Sample = { rps: number; cpuUs: number; pgUs: number };
  const rounds: Array<{ hello: Sample; models: Sample; download: Sample }> = [];
  // Round 0 is not counted: it warms the JIT's optimising tiers, whose compiling counts as the
  // process's CPU (a server an operator runs for days has long finished it).
  for (let round = -1; round < ROUNDS; round++) {
    const hello = await measure(`http://127.0.0.1:${bare.port}/`);
    const models = await measure(`${base}/api/models`);
    const download = await measure(`${base}/api/models/model-07/download?quant=int4&sdk=v1.0`, `Bearer ${key}`);
    if (round >= 0) rounds.push({ hello, models, download });
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const fmt = (n: number) => `${Math.round(n).toLocaleString('en-US')} req/s`;
  const m = (k: 'hello' | 'models' | 'download') => median(rounds.map((r) => r[k].rps));
  // Server CPU per request is far steadier than req/s on a shared machine: the load generator
  // competes for the same cores. hello ÷ target CPU is the ratio a CPU-bound server would reach.
  const cpu = (k: 'hello' | 'models' | 'download') => median(rounds.map((r) => r[k].cpuUs));
  const line = (k: 'models' | 'download') =>
    `${fmt(m(k))}   ratio ${median(rounds.map((r) => r[k].rps / r.hello.rps)).toFixed(2)}   server CPU ${cpu(k).toFixed(1)} µs/req (hello ÷ this ${(cpu('hello') / cpu(k)).toFixed(2)})`;
  console.log(`bare Bun.serve hello          ${fmt(m('hello'))}   server CPU ${cpu('hello').toFixed(1)} µs/req`);
  console.log(`GET /api/models               ${line('models')}   (target ≥ 0.70)`);
  console.log(`302 download with an API key  ${line('download')}   (target ≥ 0.50)`);
  // The download records' batch inserts (the catalog is served from memory).
  console.log(`PostgreSQL CPU per 302         ${median(rounds.map((r) => r.download.pgUs)).toFixed(1)} µs`);
} finally {
  bare.stop(true);
  await server.stop(true);
  await t.close();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);

/**
 * Start-up time: from exec to the first 200 on /healthz, for dist/cpd on PostgreSQL and on a
 * reopened embedded database, against a hello-world Bun server compiled the same way
 * (`bun build --compile --bytecode --format=esm --minify`), measured in the same run.
 * Targets (issue 2): ≤ 60 ms on PostgreSQL, ≤ 700 ms embedded reopen.
 *
 *   bun bench/startup.ts            (RUNS=20 for more samples; CPD=path to time another build)
 *   BEFORE=path/to/old/cpd bun bench/startup.ts
 *                                   also times that build on PostgreSQL, its starts alternated with
 *                                   this build's so a change of the machine's speed hits both alike
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, ensureBuilt } from '../tests/support/binary';
import { createEmptyPostgresDatabase } from '../tests/support/db';
import { freePort } from '../tests/support/ports';

const RUNS = Number(process.env.RUNS ?? 10);
const work = mkdtempSync(join(tmpdir(), 'cpd-bench-startup-'));

/** One start: exec → first 200 on /healthz, in milliseconds; then SIGTERM and wait for exit. */
async function startOnce(cmd: string[], env: Record<string, string>): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const proc = Bun.spawn(cmd, { cwd: work, env: { ...baseEnv(), LOG_LEVEL: 'warn', ...env, PORT: String(port) }, stdout: 'ignore', stderr: 'inherit' });
  const deadline = started + 60_000;
  let elapsed = -1;
  while (performance.now() < deadline && proc.exitCode === null) {
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) {
      elapsed = performance.now() - started;
      break;
    }
    await Bun.sleep(1);
  }
  proc.kill('SIGTERM');
  await proc.exited;
  if (elapsed < 0) throw new Error(`${cmd.join(' ')} did not answer /healthz`);
  return elapsed;
}

/** Median, min and max of `runs` starts of each command, the commands' starts alternated. */
async function measureAlternated(cmds: string[][], env: Record<string, string>, runs: number) {
  for (const cmd of cmds) await startOnce(cmd, env); // warm-up: page cache; first embedded start runs initdb; first PostgreSQL start migrates
  const times = cmds.map(() => [] as number[]);
  for (let i = 0; i < runs; i++) for (const [j, cmd] of cmds.entries()) times[j]!.push(await startOnce(cmd, env));
  return times.map((t) => {
    t.sort((a, b) => a - b);
    return { median: t[Math.floor(t.length / 2)]!, min: t[0]!, max: t[t.length - 1]! };
  });
}

const measure = async (cmd: string[], env: Record<string, string>, runs: number) => (await measureAlternated([cmd], env, runs))[0]!;

async function buildHello(): Promise<string> {
  const source = join(work, 'hello.ts');
  writeFileSync(source, "Bun.serve({ hostname: '127.0.0.1', port: Number(process.env.PORT), development: false, fetch: () => Response.json({ status: 'ok' }) });\n");
  const out = join(work, 'hello');
  const build = Bun.spawnSync([process.execPath, 'build', source, '--compile', '--bytecode', '--format=esm', '--minify', '--outfile', out]);
  if (build.exitCode !== 0) throw new Error(`hello-world build failed: ${build.stderr}`);
  return out;
}

const cpd = process.env.CPD ?? (await ensureBuilt());
const hello = await buildHello();
const db = await createEmptyPostgresDatabase();
try {
  const baseline = await measure([hello], {}, RUNS);
  const before = process.env.BEFORE;
  const pgEnv = { DATABASE_URL: db.url, DATA_DIR: join(work, 'pg-site') };
  const [postgres, postgresBefore] = await measureAlternated(before ? [[cpd, 'serve'], [before, 'serve']] : [[cpd, 'serve']], pgEnv, RUNS);
  const embedded = await measure([cpd, 'serve'], { DATA_DIR: join(work, 'embedded-site') }, Math.max(3, Math.ceil(RUNS / 2)));

  const fmt = (n: number) => `${n.toFixed(1)} ms`;
  const row = (name: string, r: typeof baseline, target?: number) =>
    `${name.padEnd(28)} median ${fmt(r.median).padStart(10)}  min ${fmt(r.min).padStart(10)}  max ${fmt(r.max).padStart(10)}  ` +
    `x${(r.median / baseline.median).toFixed(2)} of hello-world${target ? `  (target ≤ ${target} ms: ${r.median <= target ? 'met' : 'MISSED'})` : ''}`;
  console.log(`startup: exec → first 200 on /healthz, ${RUNS} runs each after a warm-up`);
  console.log(row('hello-world (same build)', baseline));
  console.log(row('cpd serve, PostgreSQL', postgres!, 60));
  if (postgresBefore) console.log(row('BEFORE, PostgreSQL', postgresBefore));
  console.log(row('cpd serve, embedded reopen', embedded, 700));
} finally {
  await db.drop();
  rmSync(work, { recursive: true, force: true });
}

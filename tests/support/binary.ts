/**
 * End-to-end helpers: build dist/cpd once and run it as a real process.
 *
 *   const cpd = await startBinary({ env: { DATABASE_URL: db.url! } });
 *   await fetch(`${cpd.url}/healthz`);
 *   expect(await cpd.stop()).toBe(0);
 *
 * The server listens on 127.0.0.1 port 0; the actual URL is read from its "listening" log line.
 * Without `cwd` it runs in a fresh temp dir (DATA_DIR=./data inside it), removed by stop().
 */
import type { Subprocess } from 'bun';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lockedMake, ROOT } from './locked-make';
import { waitFor } from './wait';

export const BINARY_PATH = join(ROOT, 'dist/cpd');

let built: Promise<string> | null = null;

/**
 * Runs `make build` once per test file (a no-op when dist/cpd is fresh; one process at a time) and
 * returns its path.
 * CPD_BINARY=/path/to/cpd runs the binary tests against that build instead (an older build, to see
 * a test fail before its fix; a release artifact).
 */
export function ensureBuilt(): Promise<string> {
  if (process.env.CPD_BINARY) return Promise.resolve(process.env.CPD_BINARY);
  built ??= (async () => {
    const proc = Bun.spawn(lockedMake('build'), {
      cwd: ROOT,
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`make build failed (${code}):\n${out}${err}`);
    return BINARY_PATH;
  })();
  return built;
}

export interface StartOptions {
  /** Added to a minimal environment (PATH, HOME, TMPDIR, HOST=127.0.0.1, PORT=0, LOG_LEVEL=info). */
  env?: Record<string, string>;
  /** Working directory; default a fresh temp dir that stop() removes. */
  cwd?: string;
  /** Executable to run; default dist/cpd (built by ensureBuilt). */
  binary?: string;
  /** Arguments; default ['serve']. */
  args?: string[];
  /** How long to wait for the "listening" line; default 60 s (a first PGlite start runs initdb). */
  readyTimeoutMs?: number;
}

export interface RunningBinary {
  /** http://127.0.0.1:PORT */
  url: string;
  proc: Subprocess<'ignore', 'pipe', 'pipe'>;
  /** Sends `signal` (default SIGTERM), waits for exit, removes the temp cwd; resolves the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number>;
  /** Everything the process wrote to stdout and stderr so far. */
  logs(): string;
}

/** Minimal environment for a child process, so the developer's own variables never leak in. */
export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = { HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' };
  for (const name of ['PATH', 'HOME', 'TMPDIR']) if (process.env[name]) env[name] = process.env[name]!;
  return env;
}

export async function startBinary(opts: StartOptions = {}): Promise<RunningBinary> {
  const binary = opts.binary ?? (await ensureBuilt());
  const ownCwd = opts.cwd === undefined;
  const cwd = opts.cwd ?? mkdtempSync(join(tmpdir(), 'cpd-e2e-'));
  const proc = Bun.spawn([binary, ...(opts.args ?? ['serve'])], {
    cwd,
    env: { ...baseEnv(), ...opts.env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  let output = '';
  const drained = Promise.all([collect(proc.stdout), collect(proc.stderr)]);
  async function collect(stream: ReadableStream<Uint8Array>) {
    const decoder = new TextDecoder();
    for await (const chunk of stream) output += decoder.decode(chunk, { stream: true });
  }

  let stopped: Promise<number> | null = null;
  const stop = (signal: NodeJS.Signals = 'SIGTERM') => {
    stopped ??= (async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const code = await proc.exited;
      await drained;
      if (ownCwd) rmSync(cwd, { recursive: true, force: true });
      return code;
    })();
    return stopped;
  };

  const listeningUrl = () => /"msg":"listening","url":"(http:\/\/[^"]+)"/.exec(output)?.[1];
  const exited = () => proc.exitCode !== null || proc.signalCode !== null;
  // A timeout is reported below with the process output, which says more than waitFor's message.
  await waitFor(() => listeningUrl() !== undefined || exited(), 'the "listening" line', { timeoutMs: opts.readyTimeoutMs ?? 60_000 }).catch(() => {});
  const url = listeningUrl();
  if (url) return { url, proc, stop, logs: () => output };
  const why = proc.exitCode !== null ? `exited with ${proc.exitCode}` : 'did not start in time';
  await stop('SIGKILL');
  throw new Error(`cpd ${why}; output:\n${output}`);
}

/**
 * The compiled dist/cpd: `cpd serve` with ENGINES supervises the fixture engine (bun:ffi works in
 * the single-file binary), `cpd engine status` shows it, and SIGTERM leaves no child behind.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, ensureBuilt, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { buildFixtures, livePids, makeBundle, waitFor } from '../../support/runtime-fixtures';

const fx = buildFixtures();
const cwd = mkdtempSync(join(tmpdir(), 'cpd-runtime-e2e-'));
const pidDir = mkdtempSync(join(tmpdir(), 'cpd-runtime-e2e-pids-'));
let db: TestDatabase;
let env: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase('postgres');
  env = {
    DATABASE_URL: db.url!,
    DATA_DIR: join(cwd, 'data'),
    ENGINES: 'echo:int4',
    ARIA_FFI_LIB: fx.engineLib,
    ARIA_ENGINE_BIN: fx.engineBin,
    ARIA_STUB_PID_DIR: pidDir,
  };
  const binary = await ensureBuilt();
  const publish = Bun.spawnSync([binary, 'models', 'publish', makeBundle(cwd, { model: 'echo' }), '--slug', 'echo', '--quant', 'int4', '--sdk', 'v1.0'], {
    cwd,
    env: { ...baseEnv(), ...env },
  });
  expect(publish.exitCode).toBe(0);
});

afterAll(async () => {
  await db.drop();
  rmSync(cwd, { recursive: true, force: true });
  rmSync(pidDir, { recursive: true, force: true });
});

test('cpd serve supervises ENGINES and SIGTERM stops the engines with it', async () => {
  const cpd = await startBinary({ cwd, env });
  const stateFile = join(cwd, 'data', 'runtimes', 'state.json');
  const engineState = () => (existsSync(stateFile) ? JSON.parse(readFileSync(stateFile, 'utf8')).processes[0] : undefined);
  try {
    await waitFor(() => engineState()?.state === 'ready', 'the engine to be ready', { timeoutMs: 30_000 });
    const { pid, port } = engineState();
    expect(livePids(pidDir)).toEqual([pid]);
    const models = await fetch(`http://127.0.0.1:${port}/v1/models`).then((r) => r.json());
    expect((models as any).data[0].id).toBe('echo');

    const status = Bun.spawnSync([await ensureBuilt(), 'engine', 'status'], { cwd, env: { ...baseEnv(), ...env } });
    expect(status.stdout.toString()).toMatch(new RegExp(`engine-echo-int4-0\\s+echo\\s+ready\\s+${pid}\\s+${port}\\s+0`));
  } finally {
    expect(await cpd.stop('SIGTERM')).toBe(0);
  }
  expect(livePids(pidDir)).toEqual([]);
  expect(engineState()).toMatchObject({ state: 'stopped', pid: null });
});

/** `cpd engine install|status` as a process, against a fake GitHub and a written state file. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { hostOsTag, readRuntimeState } from '../../../src/modules/runtime';
import { type FakeGitHub, startFakeGitHub } from '../../support/fake-github';
import { fakeReleaseAssets } from '../../support/runtime-fixtures';

const MAIN = resolve(import.meta.dir, '../../../src/main.ts');
const dataDir = mkdtempSync(join(tmpdir(), 'cpd-engine-cli-'));
let gh: FakeGitHub;

async function cpd(...args: string[]) {
  const proc = Bun.spawn([process.execPath, MAIN, ...args], {
    env: { PATH: process.env.PATH, DATA_DIR: dataDir, GITHUB_API_URL: gh.url, LOG_LEVEL: 'warn' },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code };
}

beforeAll(async () => {
  const os = hostOsTag()!;
  const assets = await fakeReleaseAssets('engine', '1.2.0', os);
  gh = startFakeGitHub({
    releases: { 'ariacompute/engine': { latest: { tag_name: 'v1.2.0', assets: assets.map((a) => ({ name: a.name })) } } },
    assets: Object.fromEntries(assets.map((a) => [`/ariacompute/engine/releases/download/v1.2.0/${a.name}`, a.body])),
  });
});

afterAll(async () => {
  await gh.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('cpd engine', () => {
  test('install prints plain progress lines off a TTY and installs the latest release', async () => {
    const res = await cpd('engine', 'install');
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ component: 'engine', tag: 'v1.2.0', previous: null });
    expect(res.stderr).toMatch(/download aria-engine_1\.2\.0_\w+\.tar\.gz: 100% \(\d+\/\d+ bytes\)/);
    expect(res.stderr).toContain('current is now v1.2.0');
    expect(readlinkSync(join(dataDir, 'runtimes', 'engine', 'current'))).toBe('v1.2.0');

    const rollback = await cpd('engine', 'install', '--rollback');
    expect(rollback.code).toBe(1);
    expect(rollback.stderr).toContain('cpd: engine install: no previous engine version to roll back to');
    expect((await cpd('engine', 'install', '--component', 'memo')).code).toBe(2);
  });

  test('status reads the state the supervisor writes', async () => {
    expect((await cpd('engine', 'status')).stdout).toContain('no supervised runtimes');
    const proc = {
      name: 'engine-echo-int4-0',
      kind: 'engine',
      model: 'echo',
      gpu: null,
      state: 'backoff',
      pid: null,
      port: 41000,
      restarts: 2,
      last_exit: { code: 3, signal: null, at: '2026-01-01T00:00:00.000Z' },
      last_error: 'exited with code 3',
      started_at: null,
      ready_at: null,
    };
    // A server pid that cannot exist: status says the state is stale.
    mkdirSync(join(dataDir, 'runtimes'), { recursive: true });
    writeFileSync(join(dataDir, 'runtimes', 'state.json'), JSON.stringify({ server_pid: 2 ** 22 + 1, updated_at: '2026-01-01T00:00:00.000Z', processes: [proc] }));
    expect(readRuntimeState(dataDir)?.server_running).toBe(false);
    const res = await cpd('engine', 'status');
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('cpd serve is not running');
    expect(res.stdout).toMatch(/engine-echo-int4-0\s+echo\s+backoff\s+-\s+41000\s+2\s+code 3\s+exited with code 3/);
    expect(JSON.parse((await cpd('engine', 'status', '--json')).stdout).processes[0]).toEqual(proc);
  });
});

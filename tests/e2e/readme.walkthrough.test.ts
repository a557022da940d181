/**
 * The README's walkthrough, executed: every ```sh walkthrough block, in order, in one bash with
 * `set -euo pipefail`, against dist/cpd, with the fake OpenAI-compatible upstream as the model
 * backend (MODEL_UPSTREAM) and a free loopback port (PORT). Then what the reader was told to
 * expect is checked in the output.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { BINARY_PATH, baseEnv, ensureBuilt } from '../support/binary';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream';

const ROOT = resolve(import.meta.dir, '../..');

/** The bodies of the README's ```sh walkthrough fences, in order. */
export function walkthroughBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh walkthrough\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

/** A port nothing listens on right now (the OS picks it; the walkthrough binds it moments later). */
function freePort(): number {
  const probe = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const { port } = probe;
  probe.stop(true);
  return port;
}

describe('README walkthrough', () => {
  let up: FakeUpstream;
  let scratch: string;
  beforeAll(async () => {
    await ensureBuilt();
    up = await startFakeUpstream({ models: ['llama-3.1-8b'] });
    scratch = mkdtempSync(join(tmpdir(), 'cpd-readme-'));
  });
  afterAll(async () => {
    await up.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('finds the walkthrough blocks', async () => {
    const blocks = walkthroughBlocks(await Bun.file(join(ROOT, 'README.md')).text());
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    expect(blocks.join('\n')).toContain('cpd serve');
  });

  test('pasted in order into bash, it runs to the end and shows what it says', async () => {
    const blocks = walkthroughBlocks(await Bun.file(join(ROOT, 'README.md')).text());
    // If a block fails, the server it started must not outlive the test.
    const script = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT", ...blocks].join('\n');
    const proc = Bun.spawn(['bash', '-c', script], {
      cwd: ROOT,
      // TMPDIR: the walkthrough's scratch directory (mktemp -d) lands inside ours, removed afterwards.
      env: { ...baseEnv(), TMPDIR: scratch, PORT: String(freePort()), MODEL_UPSTREAM: up.url, PATH: `${dirname(BINARY_PATH)}:${process.env.PATH}` },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(code, `the walkthrough failed; stdout:\n${out}\nstderr:\n${err}`).toBe(0);

    expect(out).toContain('"email":"admin@example.com"');
    expect(out).toMatch(/^paid$/m);
    expect(out).toContain('"balance":20,');
    expect(out).toMatch(/^llama-3\.1-8b$/m);
    // 10 prompt + 5 completion tokens at 0.2 per million.
    expect(out).toMatch(/^x-cost: 0\.000003\r?$/im);
    expect(out).toContain('["topup",20]');
    expect(out).toContain('event: delta');
    expect(out).toContain('event: turn.completed');
    expect(out).toContain('No errors detected in compressed data of llama.zip.');
    expect(out).toContain('"model":"llama-3.1-8b"');
    // The upstream saw the gateway's call and the agent's turn, both for the one model name.
    const models = up.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body?.model);
    expect(models).toEqual(['llama-3.1-8b', 'llama-3.1-8b']);
  }, 180_000);
});

/** Bundles on disk and publishing helpers for the registry tests. */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { publishArtifact, type PublishInput } from '../../../src/modules/registry';
import type { TestApp } from '../../support/app';

export function makeBundle(files: Record<string, string | Uint8Array>): string {
  const dir = mkdtempSync(join(tmpdir(), 'cpd-bundle-'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return dir;
}

export function bundleFiles(seed = 1): Record<string, Uint8Array | string> {
  const weight = new Uint8Array(200_000 + seed);
  for (let i = 0; i < weight.length; i++) weight[i] = (i * 31 + seed) & 0xff;
  return {
    'config.json': JSON.stringify({ format: 'aria-quant-bundle', format_version: 2, quantization: 'q4', model: 'demo', tensors: [], seed }),
    'weight.bin': weight,
    'tokenizer/tokenizer.json': '{"version":"1.0"}',
  };
}

export async function publish(t: TestApp, input: PublishInput) {
  const result = await publishArtifact(t.ctx, t.services.store, input);
  await t.services.registry.reload();
  return result;
}

export function unzip(args: string[]) {
  const r = Bun.spawnSync(['unzip', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, out: `${r.stdout.toString()}${r.stderr.toString()}` };
}



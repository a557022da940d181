/**
 * Runtime fixtures: compiles tests/fixtures/aria_fixture.c into the engine and router
 * FFI libraries, writes the `aria-engine` / `aria-router` wrappers around the stub server, builds
 * model bundles and packs fake releases. Builds are cached by source hash under the temp dir.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { create as createTar } from 'tar';
import { libraryFileName } from '../../src/modules/runtime';

const FIXTURES = resolve(import.meta.dir, '../fixtures');

export interface RuntimeFixtures {
  dir: string;
  engineLib: string;
  routerLib: string;
  engineBin: string;
  routerBin: string;
}

let cached: RuntimeFixtures | null = null;

export function buildFixtures(): RuntimeFixtures {
  if (cached) return cached;
  const sources = ['aria_fixture.c', 'stub-engine.ts'].map((f) => readFileSync(join(FIXTURES, f)));
  // The wrappers name this runtime and this checkout's fixtures: a build for another checkout (since
  // deleted, say a CI clone run with the same Bun) must not be reused.
  const hash = createHash('sha256').update(process.execPath).update(FIXTURES).update(Buffer.concat(sources)).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), `cpd-runtime-fixtures-${hash}`);
  const result: RuntimeFixtures = {
    dir,
    engineLib: join(dir, libraryFileName('engine')),
    routerLib: join(dir, libraryFileName('router')),
    engineBin: join(dir, 'aria-engine'),
    routerBin: join(dir, 'aria-router'),
  };
  if (!existsSync(join(dir, '.complete'))) {
    // Build next to the final place and rename: parallel test processes never see half a build.
    const building = `${dir}.build-${randomBytes(4).toString('hex')}`;
    mkdirSync(building, { recursive: true });
    const cc = Bun.spawnSync(['cc', '-shared', '-fPIC', '-O1', '-o', join(building, libraryFileName('engine')), join(FIXTURES, 'aria_fixture.c')]);
    if (cc.exitCode !== 0) throw new Error(`cc failed: ${cc.stderr.toString()}`);
    copyFileSync(join(building, libraryFileName('engine')), join(building, libraryFileName('router')));
    for (const name of ['aria-engine', 'aria-router']) {
      writeFileSync(join(building, name), `#!/bin/sh\nexec "${process.execPath}" "${join(FIXTURES, 'stub-engine.ts')}" ${name} "$@"\n`);
      chmodSync(join(building, name), 0o755);
    }
    writeFileSync(join(building, '.complete'), '');
    try {
      renameSync(building, dir);
    } catch {
      rmSync(building, { recursive: true, force: true }); // another process won the race
    }
  }
  cached = result;
  return result;
}

/** A bundle directory (config.json with format aria-quant-bundle, weight.bin, tokenizer files); `broken` leaves out what makes it valid. */
export function makeBundle(parent: string, opts: { model?: string; broken?: 'no-weights' | 'bad-format' } = {}): string {
  const dir = mkdtempSync(join(parent, 'bundle-'));
  const format = opts.broken === 'bad-format' ? 'safetensors' : 'aria-quant-bundle';
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ format, format_version: 2, quantization: 'int4', model: opts.model ?? 'echo-1b', tensors: [] }));
  if (opts.broken !== 'no-weights') writeFileSync(join(dir, 'weight.bin'), randomBytes(256));
  writeFileSync(join(dir, 'tokenizer.json'), '{}');
  return dir;
}

/** Packs every file of `srcDir` into a .tar.gz at `file`. */
export async function packTarGz(srcDir: string, file: string, entries = readdirSync(srcDir)) {
  await createTar({ gzip: true, file, cwd: srcDir, portable: true }, entries);
  return file;
}

export interface FakeReleaseAsset {
  name: string;
  body: Uint8Array;
}

/**
 * The engine (or router) release for `osTag`: the binary archive with the wrapper script and the
 * FFI archive with the fixture library, named as the aria releases name it.
 */
export async function fakeReleaseAssets(component: 'engine' | 'router', version: string, osTag: string): Promise<FakeReleaseAsset[]> {
  const fx = buildFixtures();
  const work = mkdtempSync(join(tmpdir(), 'cpd-fake-release-'));
  try {
    const bin = component === 'engine' ? fx.engineBin : fx.routerBin;
    const lib = component === 'engine' ? fx.engineLib : fx.routerLib;
    const binName = component === 'engine' ? 'aria-engine' : 'aria-router';
    mkdirSync(join(work, 'bin'));
    mkdirSync(join(work, 'lib'));
    copyFileSync(bin, join(work, 'bin', binName));
    chmodSync(join(work, 'bin', binName), 0o755);
    copyFileSync(lib, join(work, 'lib', libraryFileName(component)));
    const binAsset = `${binName}_${version}_${osTag}.tar.gz`;
    const libAsset = `lib${binName}_ffi_${version}_${osTag}.tar.gz`;
    await packTarGz(join(work, 'bin'), join(work, binAsset));
    await packTarGz(join(work, 'lib'), join(work, libAsset));
    return [binAsset, libAsset].map((name) => ({ name, body: new Uint8Array(readFileSync(join(work, name))) }));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Pids of processes still alive among those the stub wrote into `pidDir`. */
export function livePids(pidDir: string): number[] {
  return readdirSync(pidDir)
    .map(Number)
    .filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
}

export { waitFor } from './wait';

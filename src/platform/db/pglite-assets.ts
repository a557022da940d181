/**
 * PGlite's WASM and data files, embedded into the compiled binary.
 * Inside `bun build --compile` PGlite cannot locate them by URL, so we import them as files
 * (Bun embeds them and hands back a path) and pass the compiled modules to PGlite ourselves.
 */
import { readFileSync } from 'node:fs';
import pgliteWasmPath from '../../../node_modules/@electric-sql/pglite/dist/pglite.wasm' with { type: 'file' };
import initdbWasmPath from '../../../node_modules/@electric-sql/pglite/dist/initdb.wasm' with { type: 'file' };
import pgliteDataPath from '../../../node_modules/@electric-sql/pglite/dist/pglite.data' with { type: 'file' };

let cached: Promise<{ pgliteWasmModule: WebAssembly.Module; initdbWasmModule: WebAssembly.Module; fsBundle: Blob }> | null = null;

/**
 * Compiled once per process. The files are read synchronously so that compilation (which JSC runs
 * on its own threads) has begun when this returns: main.ts calls it early for `cpd serve`.
 */
export function pgliteAssets() {
  cached ??= (async () => {
    const [pgliteWasmModule, initdbWasmModule] = await Promise.all([
      WebAssembly.compile(readFileSync(pgliteWasmPath)),
      WebAssembly.compile(readFileSync(initdbWasmPath)),
    ]);
    return { pgliteWasmModule, initdbWasmModule, fsBundle: Bun.file(pgliteDataPath) };
  })();
  return cached;
}

/**
 * PGlite's WASM and data files, embedded into the compiled binary.
 * Inside `bun build --compile` PGlite cannot locate them by URL, so we import them as files
 * (Bun embeds them and hands back a path) and pass the compiled modules to PGlite ourselves.
 */
import pgliteWasmPath from '../../../node_modules/@electric-sql/pglite/dist/pglite.wasm' with { type: 'file' };
import initdbWasmPath from '../../../node_modules/@electric-sql/pglite/dist/initdb.wasm' with { type: 'file' };
import pgliteDataPath from '../../../node_modules/@electric-sql/pglite/dist/pglite.data' with { type: 'file' };

let cached: Promise<{ pgliteWasmModule: WebAssembly.Module; initdbWasmModule: WebAssembly.Module; fsBundle: Blob }> | null = null;

export function pgliteAssets() {
  cached ??= (async () => {
    const [pgliteWasmModule, initdbWasmModule] = await Promise.all([
      WebAssembly.compile(await Bun.file(pgliteWasmPath).arrayBuffer()),
      WebAssembly.compile(await Bun.file(initdbWasmPath).arrayBuffer()),
    ]);
    return { pgliteWasmModule, initdbWasmModule, fsBundle: Bun.file(pgliteDataPath) };
  })();
  return cached;
}

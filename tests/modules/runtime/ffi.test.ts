import { afterAll, describe, expect, test } from 'bun:test';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkBundle, connectRouter, freeLoopbackPort as freePort, locateLibrary, openEngineLibrary } from '../../../src/modules/runtime';
import { buildFixtures, makeBundle, waitFor } from '../../support/runtime-fixtures';


const fx = buildFixtures();
const work = mkdtempSync(join(tmpdir(), 'cpd-ffi-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('engine FFI library', () => {
  test('completes with the echo model, streams fragments and grows the output buffer', () => {
    const lib = openEngineLibrary(fx.engineLib);
    const model = lib.loadModel(makeBundle(work));
    try {
      const result = model.complete([{ role: 'user', content: 'hello there' }]);
      expect(result).toMatchObject({ success: true, response: 'echo: hello there', total_tokens: 5 });

      const chunks: string[] = [];
      const streamed = model.completeStream([{ role: 'user', content: 'one two three' }], (c) => chunks.push(c));
      expect(chunks).toEqual(['echo:', ' one', ' two', ' three']);
      expect(streamed.response).toBe(chunks.join(''));

      // Larger than the first 16 KiB buffer: the binding must grow it and retry.
      const long = 'word '.repeat(5000).trim();
      expect(model.complete([{ role: 'user', content: 'x' }, { role: 'user', content: long }]).response).toBe(`echo: ${long}`);
      const longChunks: string[] = [];
      const longStream = model.completeStream([{ role: 'user', content: long }], (c) => longChunks.push(c));
      expect(longChunks.join('')).toBe(longStream.response);
    } finally {
      model.destroy();
      lib.close();
    }
  });

  test('a bad bundle is refused with the library message', () => {
    expect(() => checkBundle(fx.engineLib, makeBundle(work, { broken: 'no-weights' }))).toThrow(/weight\.bin is missing/);
    expect(() => checkBundle(fx.engineLib, makeBundle(work, { broken: 'bad-format' }))).toThrow(/format is not aria-quant-bundle/);
    expect(() => checkBundle(fx.engineLib, makeBundle(work))).not.toThrow();
  });

  test('a missing library or symbol names it', () => {
    expect(() => locateLibrary('engine', work)).toThrow(/libaria_ffi\.so not found: set ARIA_FFI_LIB/);
    expect(() => locateLibrary('router', work, join(work, 'nope.so'))).toThrow(/router FFI library not found: .*nope\.so/);
    expect(locateLibrary('engine', work, fx.engineLib)).toBe(fx.engineLib);

    const src = join(work, 'partial.c');
    writeFileSync(src, 'const char *aria_last_error(void) { return ""; }\n');
    const lib = join(work, 'libpartial.so');
    expect(Bun.spawnSync(['cc', '-shared', '-fPIC', '-o', lib, src]).exitCode).toBe(0);
    expect(() => openEngineLibrary(lib)).toThrow(/symbol aria_model_init is missing/);
    copyFileSync(fx.engineLib, join(work, 'copy.so'));
    expect(() => openEngineLibrary(join(work, 'copy.so')).close()).not.toThrow();
  });
});

describe('router FFI library', () => {
  test('lists the models of a running router and reports connection failures', async () => {
    // The library does blocking socket I/O on this thread, so the router must be another process.
    const port = await freePort();
    const router = Bun.spawn([fx.routerBin, 'serve', '--bind', `127.0.0.1:${port}`, '--mgmt-bind', `127.0.0.1:${await freePort()}`], {
      env: { ...process.env, ARIA_STUB_ROUTER_MODELS: 'm-a,m-b' },
      stderr: 'ignore',
    });
    try {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => null))?.ok === true);
      const handle = connectRouter(fx.routerLib, `http://127.0.0.1:${port}`);
      expect(handle.models()).toEqual(['m-a', 'm-b']);
      expect(handle.lastRoute()).toBeNull();
      handle.close();
    } finally {
      router.kill();
      await router.exited;
    }
    expect(() => connectRouter(fx.routerLib, 'not a url')).toThrow(/aria_router_connect not a url failed: cannot connect/);
    const closed = connectRouter(fx.routerLib, `http://127.0.0.1:${port}`);
    expect(() => closed.models()).toThrow(/aria_router_models failed: cannot connect to router/);
    closed.close();
  });
});

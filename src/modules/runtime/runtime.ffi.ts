/**
 * bun:ffi bindings for the engine and router FFI libraries (the C ABI the aria projects publish). Every call returns
 * 0 / -1 and leaves a thread-local message in *_last_error(); JSON results are written into a
 * caller buffer, which is grown and the call retried when the library reports
 * "buffer too small: need N".
 */
import { CString, dlopen, FFIType, JSCallback, type Pointer } from 'bun:ffi';
import { existsSync } from 'node:fs';
import { AppError } from '../../platform/errors';
import { findInstalledFile } from './runtime.paths';
import { libraryFileName, type RuntimeComponent } from './runtime.platform';

const INITIAL_OUT = 16 * 1024;
const MAX_OUT = 64 * 1024 * 1024;
const { ptr, cstring, i32, u64, void: none } = FFIType;

const ENGINE_SYMBOLS = {
  aria_last_error: { args: [], returns: cstring },
  aria_model_init: { args: [ptr], returns: ptr },
  aria_model_destroy: { args: [ptr], returns: none },
  aria_complete: { args: [ptr, ptr, ptr, ptr, ptr, u64], returns: i32 },
  aria_complete_stream: { args: [ptr, ptr, ptr, ptr, ptr, u64, FFIType.function, ptr], returns: i32 },
} as const;

const ROUTER_SYMBOLS = {
  aria_router_last_error: { args: [], returns: cstring },
  aria_router_connect: { args: [ptr], returns: ptr },
  aria_router_destroy: { args: [ptr], returns: none },
  aria_router_models: { args: [ptr, ptr, u64], returns: i32 },
  aria_router_last_route: { args: [ptr, ptr, u64], returns: i32 },
} as const;

const ENV_VAR: Record<RuntimeComponent, string> = { engine: 'ARIA_FFI_LIB', router: 'ARIA_ROUTER_FFI_LIB' };

/** The configured library (ARIA_FFI_LIB / ARIA_ROUTER_FFI_LIB), else the one inside the installed `current` version. */
export function locateLibrary(component: RuntimeComponent, dataDir: string, configured: string | null = null): string {
  const fromEnv = configured;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new AppError('unavailable', `${component} FFI library not found: ${fromEnv} (from ${ENV_VAR[component]})`);
    return fromEnv;
  }
  const name = libraryFileName(component);
  const installed = findInstalledFile(dataDir, component, name);
  if (!installed)
    throw new AppError('unavailable', `${component} FFI library ${name} not found: set ${ENV_VAR[component]} or run \`cpd engine install --component ${component}\``);
  return installed;
}

function open<S extends Record<string, { args: readonly FFIType[]; returns: FFIType }>>(path: string, symbols: S) {
  try {
    return dlopen(path, symbols as any) as unknown as { symbols: Record<keyof S, (...args: any[]) => any>; close(): void };
  } catch (err) {
    // Name the symbol when the library lacks one of ours (dlopen reports only the first failure).
    const missing = Object.keys(symbols).find((name) => {
      try {
        dlopen(path, { [name]: symbols[name] } as any).close();
        return false;
      } catch {
        return true;
      }
    });
    const why = missing ? `symbol ${missing} is missing` : (err as Error).message;
    throw new AppError('unavailable', `cannot load FFI library ${path}: ${why}`);
  }
}

const cstr = (s: string) => Buffer.from(`${s}\0`);

/** Calls `fill(out, len)` with a growing buffer until it fits; returns the NUL-terminated text. */
function withOutBuffer(fill: (out: Buffer, len: number) => number, lastError: () => string, what: string): string {
  let size = INITIAL_OUT;
  for (;;) {
    const out = Buffer.alloc(size);
    if (fill(out, size) === 0) {
      const end = out.indexOf(0);
      return out.subarray(0, end === -1 ? size : end).toString('utf8');
    }
    const message = lastError();
    const need = /buffer too small: need (\d+)/.exec(message);
    if (!need || Number(need[1]) <= size || Number(need[1]) > MAX_OUT) throw new AppError('upstream', `${what} failed: ${message || 'unknown error'}`);
    size = Number(need[1]);
  }
}

export interface CompletionResult {
  success: boolean;
  error: string | null;
  response: string;
  function_calls: unknown[];
  total_tokens: number;
}

export interface EngineModel {
  complete(messages: unknown[], options?: object, tools?: unknown[]): CompletionResult;
  completeStream(messages: unknown[], onChunk: (text: string) => void, options?: object, tools?: unknown[]): CompletionResult;
  destroy(): void;
}

export interface EngineLibrary {
  path: string;
  /** Loads a bundle; throws AppError naming the bundle and aria_last_error() when it is refused. */
  loadModel(bundleDir: string): EngineModel;
  close(): void;
}

export function openEngineLibrary(path: string): EngineLibrary {
  const lib = open(path, ENGINE_SYMBOLS);
  const f = lib.symbols;
  const lastError = () => String(f.aria_last_error() ?? '');
  return {
    path,
    loadModel(bundleDir) {
      const handle = f.aria_model_init(cstr(bundleDir)) as Pointer | null;
      if (!handle) throw new AppError('invalid', `bundle ${bundleDir} refused: ${lastError() || 'aria_model_init failed'}`);
      let destroyed = false;
      const args = (messages: unknown[], options?: object, tools?: unknown[]) =>
        [handle, cstr(JSON.stringify(messages)), cstr(JSON.stringify(options ?? {})), cstr(JSON.stringify(tools ?? []))] as const;
      return {
        complete(messages, options, tools) {
          const a = args(messages, options, tools);
          return JSON.parse(withOutBuffer((out, len) => f.aria_complete(...a, out, len), lastError, 'aria_complete'));
        },
        completeStream(messages, onChunk, options, tools) {
          const a = args(messages, options, tools);
          // A retry after "buffer too small" generates again: deliver fragments from the first pass only.
          let delivering = true;
          const callback = new JSCallback((chunk: Pointer, _user: Pointer) => delivering && onChunk(new CString(chunk).toString()), {
            args: [ptr, ptr],
            returns: none,
          });
          try {
            return JSON.parse(
              withOutBuffer(
                (out, len) => {
                  const rc = f.aria_complete_stream(...a, out, len, callback.ptr, null);
                  delivering = false;
                  return rc;
                },
                lastError,
                'aria_complete_stream',
              ),
            );
          } finally {
            callback.close();
          }
        },
        destroy() {
          if (!destroyed) f.aria_model_destroy(handle);
          destroyed = true;
        },
      };
    },
    close: () => lib.close(),
  };
}

/** Loads the bundle through the engine library and releases it: the check before an engine starts. */
export function checkBundle(libraryPath: string, bundleDir: string): void {
  const lib = openEngineLibrary(libraryPath);
  try {
    lib.loadModel(bundleDir).destroy();
  } finally {
    lib.close();
  }
}

export interface RouterHandle {
  /** Model ids the router can serve (aria_router_models). */
  models(): string[];
  lastRoute(): unknown;
  close(): void;
}

/** aria_router_connect on a running router; throws with aria_router_last_error() when it fails. */
export function connectRouter(libraryPath: string, baseUrl: string): RouterHandle {
  const lib = open(libraryPath, ROUTER_SYMBOLS);
  const f = lib.symbols;
  const lastError = () => String(f.aria_router_last_error() ?? '');
  const handle = f.aria_router_connect(cstr(baseUrl)) as Pointer | null;
  if (!handle) {
    const message = lastError();
    lib.close();
    throw new AppError('unavailable', `aria_router_connect ${baseUrl} failed: ${message}`);
  }
  return {
    models() {
      return modelIds(JSON.parse(withOutBuffer((out, len) => f.aria_router_models(handle, out, len), lastError, 'aria_router_models')));
    },
    lastRoute() {
      return JSON.parse(withOutBuffer((out, len) => f.aria_router_last_route(handle, out, len), lastError, 'aria_router_last_route'));
    },
    close() {
      f.aria_router_destroy(handle);
      lib.close();
    },
  };
}

/** Accepts an OpenAI list ({data: [{id}]}), {models: [...]} or a bare array of ids or objects. */
function modelIds(value: unknown): string[] {
  const list = Array.isArray(value) ? value : ((value as { data?: unknown[]; models?: unknown[] })?.data ?? (value as { models?: unknown[] })?.models ?? []);
  return list.map((m) => (typeof m === 'string' ? m : (m as { id?: string; name?: string })?.id ?? (m as { name?: string })?.name)).filter((m): m is string => !!m);
}

/**
 * Builds the real app on a test database, with a capturing logger, for route tests through
 * app.handle(new Request(…)). Nothing of ours is mocked.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { type BuildOptions, buildApp } from '../../src/app';
import { loadConfig } from '../../src/config';
import type { Clock } from '../../src/platform/clock';
import { systemClock } from '../../src/platform/clock';
import type { AppContext } from '../../src/app-context';
import { createLogger } from '../../src/platform/logger';
import { createMetricsRegistry } from '../../src/platform/metrics/registry';
import { createTestDatabase, type DbKind, type TestDatabase } from './db';

export const TEST_SECRET = 'test-secret-key-0123456789abcdef0123456789';

export interface TestContext {
  ctx: AppContext;
  testDb: TestDatabase;
  dataDir: string;
  logs: string[];
  close(): Promise<void>;
}

export async function createTestContext(
  kind: DbKind = 'postgres',
  env: Record<string, string | undefined> = {},
  opts: { clock?: Clock; testDb?: TestDatabase } = {},
): Promise<TestContext> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cpd-test-'));
  const config = loadConfig({ DATA_DIR: dataDir, SECRET_KEY: TEST_SECRET, PUBLIC_URL: 'http://localhost:8080', LOG_LEVEL: 'info', ...env });
  const testDb = opts.testDb ?? (await createTestDatabase(kind));
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      const line = String(chunk);
      logs.push(line);
      done();
    },
  });
  const closers: Array<() => Promise<void> | void> = [];
  const ctx: AppContext = {
    config,
    database: testDb.database,
    log: createLogger(config.logLevel, sink),
    clock: opts.clock ?? systemClock,
    metrics: createMetricsRegistry(),
    onShutdown: (fn) => closers.push(fn),
  };
  return {
    ctx,
    testDb,
    dataDir,
    logs,
    async close() {
      for (const fn of closers.reverse()) await fn();
      if (!opts.testDb) await testDb.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface TestResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export async function createTestApp(
  kind: DbKind = 'postgres',
  env: Record<string, string | undefined> = {},
  opts: { clock?: Clock; testDb?: TestDatabase; build?: BuildOptions } = {},
) {
  const tc = await createTestContext(kind, env, opts);
  const built = await buildApp(tc.ctx, opts.build);
  async function request<T = any>(
    method: string,
    path: string,
    init: { body?: unknown; token?: string; headers?: Record<string, string> } = {},
  ): Promise<TestResponse<T>> {
    const headers: Record<string, string> = { ...init.headers };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await built.app.handle(new Request(`http://localhost${path}`, { method, headers, body }));
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {}
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }
  return { ...tc, ...built, request };
}

export type TestApp = Awaited<ReturnType<typeof createTestApp>>;

/**
 * One site for the console's browser tests: dist/cpd as a process on its own PostgreSQL database,
 * on a known loopback port so PUBLIC_URL (payment pages, the Origin check) is the address the
 * browser uses, a fake model upstream behind one priced model, and an admin made the operator's
 * way (`cpd users create --admin`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freeLoopbackPort } from '../../src/modules/runtime';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from './binary';
import { createEmptyPostgresDatabase } from './db';
import { type FakeUpstream, startFakeUpstream } from './fake-upstream';

export const CONSOLE_MODEL = 'console-model';
export const ADMIN = { email: 'admin@example.com', password: 'admin-password-1' };

export interface ConsoleSite {
  url: string;
  cpd: RunningBinary;
  upstream: FakeUpstream;
  /** A session token of the admin, for setting up through the API as curl would. */
  adminToken: string;
  /** Runs `cpd <args>` to completion with the site's environment (same database and object store). */
  run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /** JSON request to the site's API with a bearer token. */
  call<T = any>(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; body: T }>;
  stop(): Promise<void>;
}

export async function startConsoleSite(site: 'intl' | 'cn', env: Record<string, string> = {}): Promise<ConsoleSite> {
  const db = await createEmptyPostgresDatabase();
  const upstream = await startFakeUpstream({ models: [CONSOLE_MODEL] });
  const port = await freeLoopbackPort();
  // One data directory for the server and the commands run beside it (the object store lives there).
  const dataDir = mkdtempSync(join(tmpdir(), 'cpd-console-'));
  const siteEnv = {
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    SITE: site,
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    MODEL_BACKENDS: `${CONSOLE_MODEL}=${upstream.url}`,
    ...env,
  };
  const cpd = await startBinary({ env: siteEnv });
  const binary = await ensureBuilt();
  async function run(args: string[]) {
    const proc = Bun.spawn([binary, ...args], { env: { ...baseEnv(), ...siteEnv }, stdout: 'pipe', stderr: 'pipe' });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  }
  const made = await run(['users', 'create', '--email', ADMIN.email, '--password', ADMIN.password, '--admin']);
  if (made.code !== 0) throw new Error(`cpd users create failed: ${made.stderr}`);

  async function call<T>(method: string, path: string, token: string, body?: unknown) {
    const res = await fetch(cpd.url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
  }
  const login = await fetch(`${cpd.url}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: ADMIN.email, password: ADMIN.password }),
  });
  const { token: adminToken } = (await login.json()) as { token: string };
  // 10 prompt + 5 completion tokens from the fake upstream at 2 per million: 0.00003 a call.
  const priced = await call('PUT', '/api/admin/billing/pricing/models', adminToken, {
    models: [{ slug: CONSOLE_MODEL, unit: 'per_million_tokens', price: 2 }],
  });
  if (priced.status !== 200) throw new Error(`pricing failed: ${JSON.stringify(priced.body)}`);

  return {
    url: cpd.url,
    cpd,
    upstream,
    adminToken,
    call,
    run,
    async stop() {
      await cpd.stop();
      await upstream.close();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { TEST_SECRET } from '../../support/app';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { waitFor } from '../../support/wait';

/**
 * Two real `cpd serve` processes on one PostgreSQL database. An account disabled through A (by
 * the API, or by `cpd users disable` as a third process) has its cached API key refused by B within
 * a second, and its sessions end everywhere.
 */
describe('disabling an account across processes', () => {
  let db: TestDatabase;
  let a: RunningBinary;
  let b: RunningBinary;
  const env = () => ({ DATABASE_URL: db.url!, SECRET_KEY: TEST_SECRET });

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    [a, b] = await Promise.all([startBinary({ env: env() }), startBinary({ env: env() })]);
  }, 180_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await db?.drop();
  });

  async function call(server: RunningBinary, method: string, path: string, token?: string, body?: unknown) {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }
  /** Whether `key` authenticates on `server` (the usage log takes a key). */
  const keyAccepted = async (server: RunningBinary, key: string) => (await call(server, 'GET', '/api/usage', key)).status === 200;

  async function cpd(...args: string[]) {
    const proc = Bun.spawn([await ensureBuilt(), ...args], { env: { ...baseEnv(), ...env() }, stdout: 'pipe', stderr: 'pipe' });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { stdout, stderr, code };
  }

  test('disabled through A by the API: B refuses the cached key within 1 s; sessions end on B', async () => {
    expect((await cpd('users', 'create', '--email', 'boss@x.example', '--password', 'boss-password', '--admin')).code).toBe(0);
    const admin = (await call(a, 'POST', '/api/auth/login', undefined, { identifier: 'boss@x.example', password: 'boss-password' })).body.token;
    const reg = await call(a, 'POST', '/api/auth/register', undefined, { email: 'abuse@x.example', password: 'abuse-password' });
    const key = (await call(a, 'POST', '/api/api-keys', reg.body.token, { name: 'k' })).body.key;
    expect(await keyAccepted(b, key)).toBe(true); // cached on B now
    expect((await call(b, 'GET', '/api/auth/me', reg.body.token)).status).toBe(200);

    const res = await call(a, 'PATCH', `/api/admin/users/${reg.body.user.id}`, admin, { disabled: true });
    expect(res.status).toBe(200);
    await waitFor(async () => !(await keyAccepted(b, key)), 'B to refuse the key', { timeoutMs: 1_000 });
    expect((await call(b, 'GET', '/api/auth/me', reg.body.token)).status).toBe(401);
    expect((await call(b, 'POST', '/api/auth/login', undefined, { identifier: 'abuse@x.example', password: 'abuse-password' })).status).toBe(403);
    const audit = await call(b, 'GET', '/api/admin/audit', admin);
    expect(audit.body.entries[0]).toMatchObject({ action: 'user.update', target: reg.body.user.id, actor_email: 'boss@x.example' });

    // Enabled again: the key works on both.
    expect((await call(b, 'PATCH', `/api/admin/users/${reg.body.user.id}`, admin, { disabled: false })).status).toBe(200);
    expect(await keyAccepted(a, key)).toBe(true);
    expect(await keyAccepted(b, key)).toBe(true);
  }, 60_000);

  test('disabled by `cpd users disable` from the shell: both servers refuse the cached key within 1 s', async () => {
    const reg = await call(b, 'POST', '/api/auth/register', undefined, { email: 'shell-target@x.example', password: 'target-password' });
    const key = (await call(b, 'POST', '/api/api-keys', reg.body.token, { name: 'k' })).body.key;
    expect(await keyAccepted(a, key)).toBe(true);
    expect(await keyAccepted(b, key)).toBe(true);
    const res = await cpd('users', 'disable', '--user', 'shell-target@x.example');
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ disabled: true });
    await waitFor(async () => !(await keyAccepted(a, key)) && !(await keyAccepted(b, key)), 'both servers to refuse the key', { timeoutMs: 1_000 });
  }, 60_000);
});

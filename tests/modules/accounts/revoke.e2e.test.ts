import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startBinary, type RunningBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { TEST_SECRET } from '../../support/app';

/**
 * Two real `cpd serve` processes on one PostgreSQL database: a key revoked through A is refused by
 * B on the very next request, though B had it cached. Also: sessions end everywhere at once.
 */
describe('revocation across processes', () => {
  let db: TestDatabase;
  let a: RunningBinary;
  let b: RunningBinary;
  const issued: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.url!, SECRET_KEY: TEST_SECRET };
    [a, b] = await Promise.all([startBinary({ env }), startBinary({ env })]);
  }, 180_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await db?.drop();
  });

  const call = async (server: RunningBinary, method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };

  test('a key revoked through A is refused by B on the very next request', async () => {
    const reg = await call(a, 'POST', '/api/auth/register', undefined, { email: 'two@example.com', password: 'two processes' });
    expect(reg.status).toBe(201);
    const token = reg.body.token;
    issued.push(token);
    // The API key listing on B proves it accepts A's session (same database).
    expect((await call(b, 'GET', '/api/api-keys', token)).status).toBe(200);

    for (let round = 0; round < 5; round++) {
      const key = await call(a, 'POST', '/api/api-keys', token, { name: `round ${round}` });
      issued.push(key.body.key);
      expect(key.status).toBe(201);
      expect((await keyCheck(b, key.body.key)).ok).toBe(true); // cached on B now
      expect((await keyCheck(b, key.body.key)).ok).toBe(true);
      expect((await call(a, 'DELETE', `/api/api-keys/${key.body.id}`, token)).status).toBe(204);
      expect((await keyCheck(b, key.body.key)).ok).toBe(false);
    }
  }, 60_000);

  test('logout through A ends the session on B at once', async () => {
    const login = await call(b, 'POST', '/api/auth/login', undefined, { identifier: 'two@example.com', password: 'two processes' });
    issued.push(login.body.token);
    expect((await call(b, 'GET', '/api/auth/me', login.body.token)).status).toBe(200);
    expect((await call(a, 'POST', '/api/auth/logout', login.body.token)).status).toBe(204);
    expect((await call(b, 'GET', '/api/auth/me', login.body.token)).status).toBe(401);
  });

  test('neither process logged a password, token or key', () => {
    const logs = a.logs() + b.logs();
    expect(logs).toContain('/api/auth/login');
    for (const secret of ['two processes', ...issued]) expect(logs.includes(secret)).toBe(false);
    expect(logs).not.toMatch(/bfvk-[0-9A-Za-z]{40}/);
  });

  /** Whether `key` authenticates on `server`, through the gateway's model list (a key-only route). */
  async function keyCheck(server: RunningBinary, key: string) {
    const res = await fetch(`${server.url}${KEY_ROUTE}`, { headers: { authorization: `Bearer ${key}` } });
    await res.arrayBuffer();
    return { ok: res.status !== 401 };
  }
});

const KEY_ROUTE = '/v1/models';

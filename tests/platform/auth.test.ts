import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Elysia } from 'elysia';
import { authPlugin } from '../../src/platform/http/auth';
import { errorPlugin } from '../../src/platform/http/errors';
import { createTestApp, type TestApp } from '../support/app';
import { makeApiKey, makeUser } from '../support/make';

/** The auth macro on a small app of its own, with the real accounts resolver behind it. */
describe('auth macro', () => {
  let t: TestApp;
  let app: { handle(request: Request): Promise<Response> };
  let user: Awaited<ReturnType<typeof makeUser>>;
  let admin: Awaited<ReturnType<typeof makeUser>>;
  let key: Awaited<ReturnType<typeof makeApiKey>>;
  const routes = ['s', 'q', 'k', 'sqk', 'a'];

  async function call(route: string, opts: { bearer?: string; cookie?: string; query?: string; authorization?: string } = {}) {
    const headers: Record<string, string> = {};
    if (opts.bearer) headers.authorization = `Bearer ${opts.bearer}`;
    if (opts.authorization) headers.authorization = opts.authorization;
    if (opts.cookie) headers.cookie = `cpd_session=${opts.cookie}`;
    const url = `http://localhost/${route}${opts.query ? `?token=${encodeURIComponent(opts.query)}` : ''}`;
    const res = await app.handle(new Request(url, { headers }));
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  beforeAll(async () => {
    t = await createTestApp('postgres');
    user = await makeUser(t);
    admin = await makeUser(t, { admin: true });
    key = await makeApiKey(t, user.id);
    app = new Elysia()
      .use(errorPlugin(t.ctx.log))
      .use(authPlugin(t.services.accounts.resolver, 'http://localhost:8080'))
      .get('/s', ({ caller }) => caller, { auth: ['session'] })
      .get('/q', ({ caller }) => caller, { auth: ['session', 'query'] })
      .get('/k', ({ caller }) => caller, { auth: ['key'] })
      .get('/sqk', ({ caller }) => caller, { auth: ['session', 'query', 'key'] })
      .get('/a', ({ caller }) => caller, { auth: ['admin'] });
  });
  afterAll(() => t.close());

  test('session: Bearer token or cookie; caller fields filled', async () => {
    const bearer = await call('s', { bearer: user.token });
    expect(bearer.status).toBe(200);
    expect(bearer.body).toEqual({ userId: user.id, email: user.email, isAdmin: false, via: 'session', sessionId: expect.any(String), keyId: null });
    const cookie = await call('s', { cookie: user.token });
    expect(cookie.status).toBe(200);
    expect(cookie.body.via).toBe('cookie');
  });

  test('query token only where the route declares query', async () => {
    expect((await call('s', { query: user.token })).status).toBe(401);
    expect((await call('k', { query: user.token })).status).toBe(401);
    const q = await call('q', { query: user.token });
    expect(q.status).toBe(200);
    expect(q.body.via).toBe('query');
    // Only session tokens travel in the query string, never keys.
    expect((await call('sqk', { query: key.key })).status).toBe(401);
  });

  test('keys only where the route declares key; sessions not on key-only routes', async () => {
    expect((await call('s', { bearer: key.key })).status).toBe(401);
    expect((await call('a', { bearer: key.key })).status).toBe(401);
    const k = await call('k', { bearer: key.key });
    expect(k.status).toBe(200);
    expect(k.body).toMatchObject({ userId: user.id, via: 'key', keyId: key.id, sessionId: null });
    expect((await call('k', { bearer: user.token })).status).toBe(401);
    expect((await call('k', { cookie: user.token })).status).toBe(401);
    expect((await call('sqk', { bearer: key.key })).body.via).toBe('key');
    expect((await call('sqk', { bearer: user.token })).body.via).toBe('session');
  });

  test('admin: 401 without credentials, 403 for a non-admin, 200 for an admin', async () => {
    const none = await call('a');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: expect.any(String) });
    const forbidden = await call('a', { bearer: user.token });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toEqual({ error: expect.any(String) });
    const ok = await call('a', { bearer: admin.token });
    expect(ok.status).toBe(200);
    expect(ok.body.isAdmin).toBe(true);
  });

  test('missing, malformed and unknown credentials are 401 {error}', async () => {
    for (const opts of [{}, { authorization: `Basic ${btoa('a:b')}` }, { authorization: 'Bearer' }, { bearer: 'not-a-session' }, { cookie: 'nope' }]) {
      for (const route of routes) {
        const res = await call(route, opts);
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
    }
  });
});

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { manualClock } from '../../support/clock';

const password = 'correct horse battery';

for (const kind of DB_KINDS) {
  describe(`auth routes (${kind})`, () => {
    const clock = manualClock();
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(kind, { SESSION_TTL: '1h', RATE_LIMITS: 'register=100/1m,login=100/1m' }, { clock });
    });
    afterAll(() => t.close());

    async function userCount() {
      const [row] = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from users`);
      return row!.n;
    }

    test('register answers 201 {token, user}, sets the session cookie, and the token works', async () => {
      const res = await t.request('POST', '/api/auth/register', { body: { email: 'New.User@example.com', password, phone: '+1 555 010 2000' } });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ token: expect.any(String), user: { id: expect.any(String), email: 'New.User@example.com' } });
      expect(Buffer.from(res.body.token, 'base64url').length).toBeGreaterThanOrEqual(32);
      expect(res.headers.get('set-cookie')).toBe(`cpd_session=${res.body.token}; Max-Age=3600; Path=/; HttpOnly; SameSite=Lax`);
      const me = await t.request('GET', '/api/auth/me', { token: res.body.token });
      expect(me.status).toBe(200);
      expect(me.body).toMatchObject({ id: res.body.user.id, email: 'New.User@example.com', phone: '+15550102000', is_admin: false, two_factor_enabled: false });
    });

    test('register with a taken email (any case) or phone is 409', async () => {
      const dupEmail = await t.request('POST', '/api/auth/register', { body: { email: 'new.user@EXAMPLE.com', password } });
      expect(dupEmail.status).toBe(409);
      expect(dupEmail.body).toEqual({ error: expect.any(String) });
      const dupPhone = await t.request('POST', '/api/auth/register', { body: { email: 'other@example.com', password, phone: '+15550102000' } });
      expect(dupPhone.status).toBe(409);
    });

    test('bad input is 400 {error} and creates nothing', async () => {
      const before = await userCount();
      const cases: unknown[] = [
        '{"email": "x@example.com", "password": ',
        { email: 'x@example.com' },
        { password },
        { email: 'x@example.com', password: 12345678 },
        { email: 42, password },
        { email: 'not-an-email', password },
        { email: `${'a'.repeat(120)}@example.com`, password },
        { email: 'x@example.com', password: 'short' },
        { email: 'x@example.com', password: 'p'.repeat(129) },
        { email: 'x@example.com', password, phone: 'call me' },
        [],
        'null',
      ];
      for (const body of cases) {
        const res = await t.request('POST', '/api/auth/register', { body });
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      expect(await userCount()).toBe(before);
      for (const body of ['{', { identifier: 'x@example.com' }, { identifier: 1, password }, { identifier: 'x@example.com', password: 'p'.repeat(129) }]) {
        expect((await t.request('POST', '/api/auth/login', { body })).status).toBe(400);
      }
    });

    test('a password of exactly 8 and of exactly 128 characters is accepted', async () => {
      expect((await t.request('POST', '/api/auth/register', { body: { email: 'eight@example.com', password: '12345678' } })).status).toBe(201);
      expect((await t.request('POST', '/api/auth/register', { body: { email: 'long@example.com', password: 'p'.repeat(128) } })).status).toBe(201);
    });

    test('login by email (any case) or by phone; unknown identifier and wrong password are the same 401', async () => {
      const byEmail = await t.request('POST', '/api/auth/login', { body: { identifier: 'NEW.user@example.com', password } });
      expect(byEmail.status).toBe(200);
      expect(byEmail.body).toEqual({ token: expect.any(String), user: { id: expect.any(String), email: 'New.User@example.com' } });
      expect(byEmail.headers.get('set-cookie')).toContain(`cpd_session=${byEmail.body.token};`);
      const byPhone = await t.request('POST', '/api/auth/login', { body: { identifier: '+1 (555) 010-2000', password } });
      expect(byPhone.status).toBe(200);
      expect(byPhone.body.user.id).toBe(byEmail.body.user.id);

      const wrong = await t.request('POST', '/api/auth/login', { body: { identifier: 'new.user@example.com', password: 'wrong password' } });
      const unknown = await t.request('POST', '/api/auth/login', { body: { identifier: 'nobody@example.com', password } });
      const unknownPhone = await t.request('POST', '/api/auth/login', { body: { identifier: '+10000000000', password } });
      for (const res of [wrong, unknown, unknownPhone]) {
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ error: wrong.body.error });
        expect(res.headers.get('set-cookie')).toBeNull();
      }
    });

    test('REGISTRATION=closed answers 403 and creates nothing', async () => {
      const closed = await createTestApp(kind, { REGISTRATION: 'closed' });
      try {
        const res = await closed.request('POST', '/api/auth/register', { body: { email: 'closed@example.com', password } });
        expect(res.status).toBe(403);
        expect(res.body).toEqual({ error: expect.any(String) });
        expect((await closed.request('POST', '/api/auth/login', { body: { identifier: 'closed@example.com', password } })).status).toBe(401);
      } finally {
        await closed.close();
      }
    });

    test('the session cookie authenticates; logout answers 204, clears it and ends the session at once', async () => {
      const login = await t.request('POST', '/api/auth/login', { body: { identifier: 'new.user@example.com', password } });
      const cookie = { cookie: `theme=dark; cpd_session=${login.body.token}` };
      expect((await t.request('GET', '/api/auth/me', { headers: cookie })).status).toBe(200);
      // A browser's own fetch() sends this site's Origin with a cookie write.
      const out = await t.request('POST', '/api/auth/logout', { headers: { ...cookie, origin: 'http://localhost:8080' } });
      expect(out.status).toBe(204);
      expect(out.text).toBe('');
      expect(out.headers.get('set-cookie')).toContain('cpd_session=; Max-Age=0');
      expect((await t.request('GET', '/api/auth/me', { headers: cookie })).status).toBe(401);
      expect((await t.request('GET', '/api/auth/me', { token: login.body.token })).status).toBe(401);
    });

    test('sessions: list marks the current one; deleting another ends it at once; a foreign id is 404', async () => {
      const user = await makeUser(t);
      const other = await makeUser(t);
      const second = await t.request('POST', '/api/auth/login', {
        body: { identifier: user.email, password: user.password },
        headers: { 'user-agent': 'curl/8.0' },
      });
      const list = await t.request('GET', '/api/auth/sessions', { token: user.token });
      expect(list.status).toBe(200);
      expect(list.body).toHaveLength(2);
      expect(list.body.filter((s: { current: boolean }) => s.current)).toHaveLength(1);
      const secondRow = list.body.find((s: { user_agent: string | null }) => s.user_agent === 'curl/8.0');
      expect(Object.keys(secondRow).sort()).toEqual(['created_at', 'current', 'expires_at', 'id', 'ip', 'user_agent']);
      expect(secondRow.current).toBe(false);
      expect(JSON.stringify(list.body)).not.toContain(user.token);

      expect((await t.request('DELETE', `/api/auth/sessions/${secondRow.id}`, { token: other.token })).status).toBe(404);
      expect((await t.request('GET', '/api/auth/me', { token: second.body.token })).status).toBe(200);
      const del = await t.request('DELETE', `/api/auth/sessions/${secondRow.id}`, { token: user.token });
      expect(del.status, del.text).toBe(204);
      expect((await t.request('GET', '/api/auth/me', { token: second.body.token })).status).toBe(401);
      expect((await t.request('DELETE', `/api/auth/sessions/${secondRow.id}`, { token: user.token })).status).toBe(404);
    });

    test('a session expires after SESSION_TTL', async () => {
      const user = await makeUser(t);
      expect((await t.request('GET', '/api/auth/me', { token: user.token })).status).toBe(200);
      clock.advance(60 * 60_000 + 1);
      expect((await t.request('GET', '/api/auth/me', { token: user.token })).status).toBe(401);
      // The next sign-in clears the account's expired sessions.
      expect((await t.request('POST', '/api/auth/login', { body: { identifier: user.email, password: user.password } })).status).toBe(200);
      const rows = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from sessions where user_id = ${user.id}`);
      expect(rows[0]!.n).toBe(1);
    });

    test('session routes refuse API keys and query tokens', async () => {
      const user = await makeUser(t);
      const key = await t.services.accounts.createApiKey(user.id, 'k');
      expect((await t.request('GET', '/api/auth/me', { token: key.key })).status).toBe(401);
      expect((await t.request('GET', `/api/auth/me?token=${user.token}`)).status).toBe(401);
      expect((await t.request('GET', '/api/api-keys', { token: key.key })).status).toBe(401);
    });
  });
}

describe('secure cookie', () => {
  test('the session cookie is Secure when PUBLIC_URL is https', async () => {
    const t = await createTestApp('postgres', { PUBLIC_URL: 'https://cpd.example.com', PAYMENT_MODE: 'sandbox' });
    try {
      const res = await t.request('POST', '/api/auth/register', { body: { email: 'secure@example.com', password } });
      expect(res.headers.get('set-cookie')).toMatch(/^cpd_session=[\w-]+; Max-Age=43200; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
    } finally {
      await t.close();
    }
  });
});

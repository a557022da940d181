import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';

for (const kind of DB_KINDS) {
  describe(`change your own password (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(kind, { RATE_LIMITS: 'login=3/1h', TRUST_PROXY: 'true' });
    });
    afterAll(() => t.close());

    const change = (token: string | undefined, body: unknown, address = '10.0.0.1') =>
      t.request('POST', '/api/auth/password', { token, body, headers: { 'x-forwarded-for': address } });
    const login = (email: string, password: string) => t.request('POST', '/api/auth/login', { body: { identifier: email, password } });

    test('204: the new password works, the old does not, other sessions end and this one stays', async () => {
      const u = await makeUser(t, { email: 'self@pw.example', password: 'first-password' });
      const other = (await login('self@pw.example', 'first-password')).body.token;
      const res = await change(u.token, { current_password: 'first-password', new_password: 'second-password' });
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect((await t.request('GET', '/api/auth/me', { token: u.token })).status).toBe(200);
      expect((await t.request('GET', '/api/auth/me', { token: other })).status).toBe(401);
      expect((await login('self@pw.example', 'first-password')).status).toBe(401);
      expect((await login('self@pw.example', 'second-password')).status).toBe(200);
      const [row] = await t.ctx.database.query<{ password_hash: string }>(sql`select password_hash from users where id = ${u.id}`);
      expect(row!.password_hash).toStartWith('$argon2id$');
    });

    test('a wrong current password is 403, a new one outside 8..128 is 400, no session is 401: nothing changes', async () => {
      const u = await makeUser(t, { email: 'careful@pw.example', password: 'keep-this-one' });
      const wrong = await change(u.token, { current_password: 'not-it-at-all', new_password: 'whatever-123' });
      expect(wrong.status).toBe(403);
      expect(wrong.body).toEqual({ error: expect.any(String) });
      for (const body of [{ current_password: 'keep-this-one', new_password: 'short' }, { current_password: 'keep-this-one', new_password: 'x'.repeat(129) }, { current_password: 'keep-this-one' }])
        expect((await change(u.token, body)).status).toBe(400);
      expect((await change(undefined, { current_password: 'keep-this-one', new_password: 'whatever-123' })).status).toBe(401);
      expect((await login('careful@pw.example', 'keep-this-one')).status).toBe(200);
    });

    test('wrong current passwords are rate limited like logins (429 with Retry-After), per account', async () => {
      const u = await makeUser(t, { email: 'guess@pw.example', password: 'real-password' });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await change(u.token, { current_password: `guess-${i}-wrong`, new_password: 'whatever-123' }, `10.0.1.${i}`)).status);
      expect(statuses).toEqual([403, 403, 403, 429]);
      const limited = await change(u.token, { current_password: 'real-password', new_password: 'whatever-123' }, '10.0.2.1');
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
      expect((await login('guess@pw.example', 'real-password')).status).toBe(200);
    });
  });
}

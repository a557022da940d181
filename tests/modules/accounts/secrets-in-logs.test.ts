import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { NobleCryptoPlugin, ScureBase32Plugin, TOTP } from 'otplib';
import { waitFor } from '../../support/wait';
import { createTestApp, type TestApp } from '../../support/app';

const totp = new TOTP({ crypto: new NobleCryptoPlugin(), base32: new ScureBase32Plugin() });

/**
 * Runs every accounts flow with recognisable secrets at debug level, then searches every log line
 * of that app for them. One test: the secrets it looks for are the ones it just used, whatever
 * ran before it.
 */
describe('no secret in the logs', () => {
  let t: TestApp;
  const secrets: string[] = [];
  const keep = <T extends string>(s: T) => {
    secrets.push(s);
    return s;
  };

  beforeAll(async () => {
    t = await createTestApp('postgres', { LOG_LEVEL: 'debug' });
  });
  afterAll(() => t.close());

  test('register, login, cookie, query token, 2FA, recovery code, API keys, bad input: no log line holds a secret', async () => {
    const password = keep('Pa55word-that-must-not-leak');
    const reg = await t.request('POST', '/api/auth/register', { body: { email: 'logs@example.com', password } });
    const token = keep(reg.body.token);
    await t.request('POST', '/api/auth/login', { body: { identifier: 'logs@example.com', password: keep('Wrong-password-must-not-leak') } });
    await t.request('POST', '/api/auth/register', { body: `{"email": "x@example.com", "password": "${keep('Broken-json-password')}"` });
    await t.request('POST', '/api/auth/register', { body: { email: 'x@example.com', password: keep('Short-1') } });
    await t.request('GET', `/api/auth/me?token=${token}`);
    await t.request('GET', '/api/auth/me', { headers: { cookie: `cpd_session=${token}` } });
    await t.request('GET', '/api/auth/me', { token: keep('bogus-session-token-must-not-leak') });

    const setup = await t.request('POST', '/api/auth/2fa/setup', { token });
    const secret = keep(setup.body.secret);
    const enable = await t.request('POST', '/api/auth/2fa/enable', { token, body: { code: await totp.generate({ secret }) } });
    for (const c of enable.body.recovery_codes) keep(c);
    const challenge = await t.request('POST', '/api/auth/login', { body: { identifier: 'logs@example.com', password } });
    keep(challenge.body.challenge_token);
    const verified = await t.request('POST', '/api/auth/2fa/verify', { body: { challenge_token: challenge.body.challenge_token, code: enable.body.recovery_codes[0] } });
    expect(verified.status).toBe(200);
    keep(verified.body.token);

    const key = await t.request('POST', '/api/api-keys', { token, body: { name: 'logged?' } });
    keep(key.body.key);
    await t.request('GET', '/v1/models', { token: key.body.key });
    await t.request('DELETE', `/api/api-keys/${key.body.id}`, { token });
    await t.request('GET', '/v1/models', { token: key.body.key });
    await t.request('POST', '/api/auth/logout', { token });

    // Access lines are written after the response: wait for the last request's before searching.
    await waitFor(() => t.logs.some((l) => l.includes('/api/auth/logout')), 'the logout access line');
    expect(t.logs.some((l) => l.includes('/api/auth/login'))).toBe(true); // the capture works
    for (const line of t.logs) {
      for (const s of secrets) expect(line.includes(s), `log line leaks a secret: ${line}`).toBe(false);
      expect(line, 'an API key in the logs').not.toMatch(/bfvk-[0-9A-Za-z]{40}/);
    }
  });
});

/**
 * Failing queries that carry secrets as parameters: a new account's password hash, a session's
 * token hash. The database itself refuses them (a CHECK constraint no new row passes, added
 * NOT VALID so existing rows stay), so each request ends in the logged 500 path with the real
 * driver error, whose parameters must not reach the log; the SQLSTATE and constraint must.
 */
for (const kind of ['postgres', 'pglite'] as const) {
  describe(`failed queries log no values (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(kind);
    });
    afterAll(() => t.close());

    const refuseNewRows = (table: 'users' | 'sessions', constraint: string) =>
      t.ctx.database.query(sql.raw(`alter table ${table} add constraint ${constraint} check (false) not valid`));
    const errorLines = () => t.logs.filter((l) => JSON.parse(l).msg === 'unhandled error');

    test('a refused account insert: 500, logged with SQLSTATE and constraint, without the password hash or email', async () => {
      const password = 'Pa55word-in-a-failing-insert';
      const email = 'failing-insert@example.com';
      await refuseNewRows('users', 'users_refuse_new_rows');
      const r = await t.request('POST', '/api/auth/register', { body: { email, password } });
      await t.ctx.database.query(sql.raw('alter table users drop constraint users_refuse_new_rows'));
      expect(r.status).toBe(500);
      const [line] = errorLines();
      expect(JSON.parse(line!).err).toMatchObject({ message: 'query failed', cause: { sqlstate: '23514', constraint: 'users_refuse_new_rows', table: 'users' } });
      for (const l of t.logs) {
        for (const value of [email, password, '$argon2', 'Failed query', 'params']) expect(l.includes(value), `log line leaks ${value}: ${l}`).toBe(false);
      }
    });

    test('a refused session insert: 500 on login, the log holds neither the token hash nor the user id', async () => {
      const password = 'Pa55word-for-a-failing-login';
      const reg = await t.request('POST', '/api/auth/register', { body: { email: 'failing-session@example.com', password } });
      expect(reg.status).toBe(201);
      const me = await t.request('GET', '/api/auth/me', { token: reg.body.token });
      await refuseNewRows('sessions', 'sessions_refuse_new_rows');
      const before = t.logs.length;
      const login = await t.request('POST', '/api/auth/login', { body: { identifier: 'failing-session@example.com', password } });
      expect(login.status).toBe(500);
      const lines = t.logs.slice(before);
      expect(lines.some((l) => l.includes('"sqlstate":"23514"') && l.includes('sessions_refuse_new_rows'))).toBe(true);
      for (const l of lines) {
        expect(l).not.toContain(me.body.id);
        expect(l, 'a SHA-256 hex digest (the token hash) in the log').not.toMatch(/[0-9a-f]{64}/);
      }
    });
  });
}

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
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

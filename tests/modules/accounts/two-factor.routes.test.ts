import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { NobleCryptoPlugin, ScureBase32Plugin, TOTP } from 'otplib';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { manualClock } from '../../support/clock';

const totp = new TOTP({ crypto: new NobleCryptoPlugin(), base32: new ScureBase32Plugin() });

for (const kind of DB_KINDS) {
  describe(`2FA (${kind})`, () => {
    const clock = manualClock();
    let t: TestApp;
    let user: Awaited<ReturnType<typeof makeUser>>;
    let secret: string;
    let recoveryCodes: string[];

    /** A fresh code: a code is accepted once, so every use moves to the next 30 s step. */
    async function nextCode() {
      clock.advance(30_000);
      return totp.generate({ secret, epoch: Math.floor(clock.now().getTime() / 1000) });
    }
    const login = () => t.request('POST', '/api/auth/login', { body: { identifier: user.email, password: user.password } });
    const verify = (challenge_token: string, code: string) => t.request('POST', '/api/auth/2fa/verify', { body: { challenge_token, code } });

    beforeAll(async () => {
      t = await createTestApp(kind, { RATE_LIMITS: 'twofa=1000/1m,login=1000/1m' }, { clock });
      user = await makeUser(t);
    });
    afterAll(() => t.close());

    test('setup answers a secret and an otpauth URL; enable needs a valid code and answers recovery codes once', async () => {
      const setup = await t.request('POST', '/api/auth/2fa/setup', { token: user.token });
      expect(setup.status).toBe(200);
      secret = setup.body.secret;
      expect(secret).toMatch(/^[A-Z2-7]{32}$/);
      expect(setup.body.otpauth_url).toStartWith('otpauth://totp/');
      expect(setup.body.otpauth_url).toContain(`secret=${secret}`);

      const wrong = await t.request('POST', '/api/auth/2fa/enable', { token: user.token, body: { code: '000000' } });
      expect(wrong.status).toBe(400);
      expect((await t.request('GET', '/api/auth/me', { token: user.token })).body.two_factor_enabled).toBe(false);

      const enable = await t.request('POST', '/api/auth/2fa/enable', { token: user.token, body: { code: await nextCode() } });
      expect(enable.status).toBe(200);
      expect(enable.body.enabled).toBe(true);
      recoveryCodes = enable.body.recovery_codes;
      expect(recoveryCodes).toHaveLength(10);
      expect(new Set(recoveryCodes).size).toBe(10);
      expect((await t.request('GET', '/api/auth/me', { token: user.token })).body.two_factor_enabled).toBe(true);
      expect((await t.request('POST', '/api/auth/2fa/setup', { token: user.token })).status).toBe(409);
      expect((await t.request('POST', '/api/auth/2fa/enable', { token: user.token, body: { code: await nextCode() } })).status).toBe(409);
    });

    test('2FA routes need a session', async () => {
      for (const path of ['/api/auth/2fa/setup', '/api/auth/2fa/enable', '/api/auth/2fa/disable']) {
        expect((await t.request('POST', path, { body: { code: '123456' } })).status).toBe(401);
      }
    });

    test('login answers a challenge and no token; verify with a TOTP code answers {token, user} and the cookie', async () => {
      const res = await login();
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ two_factor_required: true, challenge_token: expect.any(String), expires_at: new Date(clock.now().getTime() + 5 * 60_000).toISOString() });
      expect(res.headers.get('set-cookie')).toBeNull();
      expect((await t.request('GET', '/api/auth/me', { token: res.body.challenge_token })).status).toBe(401);

      const ok = await verify(res.body.challenge_token, await nextCode());
      expect(ok.status).toBe(200);
      expect(ok.body).toEqual({ token: expect.any(String), user: { id: user.id, email: user.email } });
      expect(ok.headers.get('set-cookie')).toContain(`cpd_session=${ok.body.token};`);
      expect((await t.request('GET', '/api/auth/me', { token: ok.body.token })).status).toBe(200);
      // A challenge is used once.
      expect((await verify(res.body.challenge_token, await nextCode())).status).toBe(401);
    });

    test('a TOTP code is accepted only once', async () => {
      const code = await nextCode();
      expect((await verify((await login()).body.challenge_token, code)).status).toBe(200);
      expect((await verify((await login()).body.challenge_token, code)).status).toBe(401);
    });

    test('a challenge expires after 5 minutes', async () => {
      const res = await login();
      clock.advance(5 * 60_000 + 1000);
      const code = await totp.generate({ secret, epoch: Math.floor(clock.now().getTime() / 1000) });
      const late = await verify(res.body.challenge_token, code);
      expect(late.status).toBe(401);
      expect(late.body).toEqual({ error: expect.any(String) });
    });

    test('four wrong codes still allow the right one', async () => {
      const { challenge_token } = (await login()).body;
      for (let i = 0; i < 4; i++) expect((await verify(challenge_token, '000000')).status).toBe(401);
      expect((await verify(challenge_token, await nextCode())).status).toBe(200);
    });

    test('the fifth wrong code ends the challenge: the right code is then refused', async () => {
      const { challenge_token } = (await login()).body;
      for (let i = 0; i < 5; i++) expect((await verify(challenge_token, 'wrong-code')).status).toBe(401);
      const code = await nextCode();
      expect((await verify(challenge_token, code)).status).toBe(401);
      // The code itself was not spent: a new challenge takes it.
      expect((await verify((await login()).body.challenge_token, code)).status).toBe(200);
    });

    test('a recovery code signs in once', async () => {
      const code = recoveryCodes[0]!;
      const ok = await verify((await login()).body.challenge_token, code.toUpperCase());
      expect(ok.status).toBe(200);
      expect((await verify((await login()).body.challenge_token, code)).status).toBe(401);
    });

    test('a garbage challenge token is 401; bad bodies are 400', async () => {
      expect((await verify('not-a-challenge', '123456')).status).toBe(401);
      for (const body of [{}, { challenge_token: 'x' }, { code: '123456' }, { challenge_token: 1, code: '1' }, { challenge_token: 'x', code: 'c'.repeat(33) }]) {
        expect((await t.request('POST', '/api/auth/2fa/verify', { body })).status).toBe(400);
      }
    });

    test('disable needs a valid code; afterwards login answers a token directly', async () => {
      expect((await t.request('POST', '/api/auth/2fa/disable', { token: user.token, body: { code: '000000' } })).status).toBe(400);
      expect((await t.request('POST', '/api/auth/2fa/disable', { token: user.token, body: { code: recoveryCodes[0]! } })).status).toBe(400);
      const off = await t.request('POST', '/api/auth/2fa/disable', { token: user.token, body: { code: await nextCode() } });
      expect(off.status).toBe(204);
      expect((await t.request('GET', '/api/auth/me', { token: user.token })).body.two_factor_enabled).toBe(false);
      const res = await login();
      expect(res.status).toBe(200);
      expect(res.body.token).toEqual(expect.any(String));
      expect((await t.request('POST', '/api/auth/2fa/disable', { token: user.token, body: { code: '123456' } })).status).toBe(409);
    });

    test('a recovery code can also disable 2FA', async () => {
      const setup = await t.request('POST', '/api/auth/2fa/setup', { token: user.token });
      secret = setup.body.secret;
      const enabled = await t.request('POST', '/api/auth/2fa/enable', { token: user.token, body: { code: await nextCode() } });
      expect((await t.request('POST', '/api/auth/2fa/disable', { token: user.token, body: { code: enabled.body.recovery_codes[3] } })).status).toBe(204);
    });
  });
}

describe('TOTP is RFC 6238', () => {
  // RFC 6238 Appendix B, SHA-1 secret "12345678901234567890"; 6-digit codes are the last 6 digits.
  const RFC_SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';
  const vectors: Array<[number, string]> = [
    [59, '287082'],
    [1111111109, '081804'],
    [1234567890, '005924'],
    [2000000000, '279037'],
  ];

  const clock = manualClock(0);
  let t: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    t = await createTestApp('pglite', {}, { clock });
    user = await makeUser(t);
    await t.ctx.database.query(sql`update users set totp_secret = ${RFC_SECRET} where id = ${user.id}`);
  });
  afterAll(() => t.close());

  // In increasing time order: each accepted code moves the account's last used step forward.
  for (const [seconds, code] of vectors) {
    test(`T=${seconds}: the server accepts ${code} and refuses its neighbour`, async () => {
      clock.advance(seconds * 1000 - clock.now().getTime());
      const login = () => t.request('POST', '/api/auth/login', { body: { identifier: user.email, password: user.password } });
      const verify = async (code: string) =>
        (await t.request('POST', '/api/auth/2fa/verify', { body: { challenge_token: (await login()).body.challenge_token, code } })).status;
      expect(await verify(String((Number(code) + 1) % 1_000_000).padStart(6, '0'))).toBe(401);
      expect(await verify(code)).toBe(200);
    });
  }
});

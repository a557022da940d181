/**
 * Phone codes through the HTTP API with SMS_PROVIDER=log: the code is read from the log line the
 * log provider writes, as a developer would. Time moves only with the manual clock.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { NobleCryptoPlugin, ScureBase32Plugin, TOTP } from 'otplib';
import { createTestApp, type TestApp } from '../../support/app';
import { MINUTE, manualClock } from '../../support/clock';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';

const totp = new TOTP({ crypto: new NobleCryptoPlugin(), base32: new ScureBase32Plugin() });
let numbers = 0;
/** A fresh number per test: the per-phone throttles of one test never touch another's. */
const newPhone = () => `+86139${String(10_000_000 + ++numbers * 7919).slice(-8)}`;

/** The code the log provider wrote for `phone` (the newest), or undefined. */
export function loggedCode(logs: string[], phone: string): string | undefined {
  const lines = logs.map((l) => JSON.parse(l)).filter((l) => l.sms_provider === 'log' && l.phone === phone && l.sms_code);
  return lines.at(-1)?.sms_code;
}

for (const kind of DB_KINDS) {
  describe(`phone codes (SMS_PROVIDER=log, ${kind})`, () => {
    const clock = manualClock();
    let t: TestApp;
    const sendCode = (phone: string, purpose: string, headers: Record<string, string> = {}) =>
      t.request('POST', '/api/auth/phone/code', { body: { phone, purpose }, headers });
    const login = (phone: string, code: string) => t.request('POST', '/api/auth/phone/login', { body: { phone, code } });
    const codeOf = (phone: string) => loggedCode(t.logs, phone);
    /** A wrong code for sure: the right one plus one, mod a million. */
    const wrong = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');
    const codeRows = (phone: string) =>
      t.testDb.database.query<{ code_hash: string; used_at: Date | null }>(
        sql`select code_hash, used_at from phone_codes where phone = ${phone}`,
      );

    beforeAll(async () => {
      t = await createTestApp(kind, { RATE_LIMITS: 'login=1000/1m,login_address=1000/1m' }, { clock });
    });
    afterAll(() => t.close());

    test('the site says phone login is on; the log line marks the code as not sent', async () => {
      expect((await t.request('GET', '/api/site')).body.features.phone_login).toBe(true);
      const phone = newPhone();
      expect(await sendCode(phone, 'register')).toMatchObject({ status: 202, body: {} });
      const line = t.logs.map((l) => JSON.parse(l)).find((l) => l.phone === phone && l.sms_code);
      expect(line.level).toBe('warn');
      expect(line.msg).toContain('SMS NOT SENT (SMS_PROVIDER=log)');
      expect(line.sms_code).toMatch(/^\d{6}$/);
    });

    test('register by code makes a phone-only account (201, cookie); a login code then signs it in', async () => {
      const phone = newPhone();
      await sendCode(phone, 'register');
      const reg = await login(phone, codeOf(phone)!);
      expect(reg.status).toBe(201);
      expect(reg.body).toEqual({ token: expect.any(String), user: { id: expect.stringMatching(/^usr_/), email: null } });
      expect(reg.headers.get('set-cookie')).toContain(`cpd_session=${reg.body.token};`);
      const me = await t.request('GET', '/api/auth/me', { token: reg.body.token });
      expect(me.body).toMatchObject({ id: reg.body.user.id, email: null, phone, two_factor_enabled: false });

      clock.advance(MINUTE);
      expect((await sendCode(phone, 'login')).status).toBe(202);
      const again = await login(phone, codeOf(phone)!);
      expect(again.status).toBe(200);
      expect(again.body.user.id).toBe(reg.body.user.id);
      expect(again.headers.get('set-cookie')).toContain(`cpd_session=${again.body.token};`);
    });

    test('the code is stored keyed (HMAC with SECRET_KEY), not as its plain SHA-256', async () => {
      const phone = newPhone();
      await sendCode(phone, 'register');
      const code = codeOf(phone)!;
      const [row] = await codeRows(phone);
      expect(row!.code_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row!.code_hash).not.toBe(new Bun.CryptoHasher('sha256').update(code).digest('hex'));
      expect(row!.code_hash).not.toContain(code);
    });

    test('a code is used once: two right answers at once make one session', async () => {
      const phone = newPhone();
      await sendCode(phone, 'register');
      const code = codeOf(phone)!;
      const answers = await Promise.all([login(phone, code), login(phone, code), login(phone, code)]);
      expect(answers.map((a) => a.status).sort()).toEqual([201, 401, 401]);
      expect((await login(phone, code)).status).toBe(401);
      const [{ n }] = (await t.testDb.database.query<{ n: number }>(sql`select count(*)::int as n from users where phone = ${phone}`)) as [
        { n: number },
      ];
      expect(n).toBe(1);
    });

    test('five tries: four wrong codes still let the right one in; five wrong kill the code', async () => {
      const phone = newPhone();
      await sendCode(phone, 'register');
      let code = codeOf(phone)!;
      for (let i = 0; i < 4; i++)
        expect((await login(phone, wrong(code))).body).toEqual({ error: 'the code is wrong or has expired; request a new one' });
      expect((await login(phone, code)).status).toBe(201);

      clock.advance(MINUTE);
      await sendCode(phone, 'login');
      code = codeOf(phone)!;
      for (let i = 0; i < 5; i++) expect((await login(phone, wrong(code))).status).toBe(401);
      expect((await login(phone, code)).status).toBe(401);
      // The owner is not locked out: a new code a minute later works.
      clock.advance(MINUTE);
      await sendCode(phone, 'login');
      expect((await login(phone, codeOf(phone)!)).status).toBe(200);
    });

    test('five tries hold however many guesses arrive at once', async () => {
      const phone = newPhone();
      await sendCode(phone, 'register');
      const code = codeOf(phone)!;
      const guesses = Array.from({ length: 20 }, (_, i) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0'));
      await Promise.all(guesses.map((g) => login(phone, g)));
      expect((await login(phone, code)).status).toBe(401);
      const [row] = await t.testDb.database.query<{ failed_attempts: number }>(
        sql`select failed_attempts from phone_codes where phone = ${phone}`,
      );
      expect(row?.failed_attempts).toBe(5);
    });

    test('a code expires after 5 minutes', async () => {
      const phone = newPhone();
      await sendCode(phone, 'register');
      const code = codeOf(phone)!;
      clock.advance(5 * MINUTE);
      expect((await login(phone, code)).status).toBe(401);

      clock.advance(MINUTE);
      await sendCode(phone, 'register');
      clock.advance(5 * MINUTE - 1000);
      expect((await login(phone, codeOf(phone)!)).status).toBe(201);
    });

    test('a new code replaces the older one of the same purpose', async () => {
      const phone = newPhone();
      await sendCode(phone, 'register');
      const first = codeOf(phone)!;
      clock.advance(MINUTE);
      await sendCode(phone, 'register');
      const second = codeOf(phone)!;
      if (first !== second) expect((await login(phone, first)).status).toBe(401);
      expect((await login(phone, second)).status).toBe(201);
    });

    test('no enumeration: login and reset for an unknown number answer 202 and send nothing; register for a taken one signs its owner in', async () => {
      const unknown = newPhone();
      const known = newPhone();
      await makeUser(t, { phone: known });
      for (const purpose of ['login', 'reset']) {
        const [forUnknown, forKnown] = [await sendCode(unknown, purpose), await sendCode(known, purpose)];
        // The same answer, byte for byte, whether the number has an account or not.
        expect(forUnknown).toMatchObject({ status: 202, body: {} });
        expect([forKnown.status, forKnown.text, forKnown.headers.get('content-type')]).toEqual([
          forUnknown.status,
          forUnknown.text,
          forUnknown.headers.get('content-type'),
        ]);
        expect(codeOf(unknown)).toBeUndefined();
        expect(codeOf(known)).toMatch(/^\d{6}$/);
        clock.advance(MINUTE);
      }
      // The throttle counts a request that sent nothing as one that did.
      await sendCode(unknown, 'login');
      expect((await sendCode(unknown, 'login')).status).toBe(429);

      const phone = newPhone();
      const owner = await makeUser(t, { phone });
      await sendCode(phone, 'register');
      const res = await login(phone, codeOf(phone)!);
      expect(res.status).toBe(200);
      expect(res.body.user).toEqual({ id: owner.id, email: owner.email });
    });

    test('a bare mainland number is +86 on the China site (stored so at sign-up, found so at sign-in), and needs its country code elsewhere', async () => {
      const cn = await createTestApp(kind, { SITE: 'cn' }, { clock });
      try {
        const owner = await makeUser(cn, { phone: '13912345678' });
        expect((await cn.request('GET', '/api/auth/me', { token: owner.token })).body.phone).toBe('+8613912345678');
        const byPassword = await cn.request('POST', '/api/auth/login', { body: { identifier: '139 1234 5678', password: owner.password } });
        expect(byPassword.body.user?.id).toBe(owner.id);
        expect((await cn.request('POST', '/api/auth/phone/code', { body: { phone: '139 1234 5678', purpose: 'login' } })).status).toBe(202);
        const code = loggedCode(cn.logs, '+8613912345678')!;
        const res = await cn.request('POST', '/api/auth/phone/login', { body: { phone: '+86 139-1234-5678', code } });
        expect(res.status).toBe(200);
        expect(res.body.user.id).toBe(owner.id);
      } finally {
        await cn.close();
      }
      // An account whose number was stored with its country code but no +: found by its E.164 form.
      const bare = await makeUser(t, { phone: '447700900123' });
      await sendCode('+44 7700 900123', 'login');
      expect((await login('+447700900123', codeOf('+447700900123')!)).body.user?.id).toBe(bare.id);
      // intl: a number without its country code is refused, and nothing is sent.
      expect(await sendCode('13912345678', 'login')).toMatchObject({
        status: 400,
        body: { error: expect.stringContaining('country code') },
      });
    });

    test('a disabled account gets no code and cannot sign in with one sent before', async () => {
      const phone = newPhone();
      const user = await makeUser(t, { phone });
      await sendCode(phone, 'login');
      const code = codeOf(phone)!;
      await t.testDb.database.query(sql`update users set disabled = true where id = ${user.id}`);
      expect((await login(phone, code)).status).toBe(403);
      clock.advance(MINUTE);
      const before = t.logs.length;
      expect((await sendCode(phone, 'login')).status).toBe(202);
      expect(t.logs.slice(before).some((l) => l.includes('sms_code'))).toBe(false);
    });

    test('an account with 2FA gets the password login’s challenge, and the challenge flow finishes it', async () => {
      const phone = newPhone();
      const user = await makeUser(t, { phone });
      const setup = await t.request('POST', '/api/auth/2fa/setup', { token: user.token });
      const step = () => Math.floor(clock.now().getTime() / 1000);
      await t.request('POST', '/api/auth/2fa/enable', {
        token: user.token,
        body: { code: await totp.generate({ secret: setup.body.secret, epoch: step() }) },
      });
      clock.advance(MINUTE);
      await sendCode(phone, 'login');
      const res = await login(phone, codeOf(phone)!);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ two_factor_required: true, challenge_token: expect.any(String), expires_at: expect.any(String) });
      expect(res.headers.get('set-cookie')).toBeNull();
      const verified = await t.request('POST', '/api/auth/2fa/verify', {
        body: { challenge_token: res.body.challenge_token, code: await totp.generate({ secret: setup.body.secret, epoch: step() }) },
      });
      expect(verified.status).toBe(200);
      expect(verified.body.user.id).toBe(user.id);
    });

    test('reset: a reset code sets a new password and ends every session; it does not sign in', async () => {
      const phone = newPhone();
      const user = await makeUser(t, { phone });
      await sendCode(phone, 'reset');
      const code = codeOf(phone)!;
      // A reset code is not a login code.
      expect((await login(phone, code)).status).toBe(401);
      expect((await t.request('POST', '/api/auth/phone/reset', { body: { phone, code, password: 'short' } })).status).toBe(400);
      const res = await t.request('POST', '/api/auth/phone/reset', { body: { phone, code, password: 'a-new-password-1' } });
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect((await t.request('GET', '/api/auth/me', { token: user.token })).status).toBe(401);
      expect((await t.request('POST', '/api/auth/login', { body: { identifier: phone, password: 'a-new-password-1' } })).status).toBe(200);
      expect((await t.request('POST', '/api/auth/login', { body: { identifier: user.email, password: user.password } })).status).toBe(401);
      expect((await t.request('POST', '/api/auth/phone/reset', { body: { phone, code, password: 'a-new-password-2' } })).status).toBe(401);
    });

    test('a phone-only account can set its first password by a reset code', async () => {
      const phone = newPhone();
      await sendCode(phone, 'register');
      expect((await login(phone, codeOf(phone)!)).status).toBe(201);
      clock.advance(MINUTE);
      await sendCode(phone, 'reset');
      expect(
        (await t.request('POST', '/api/auth/phone/reset', { body: { phone, code: codeOf(phone), password: 'first-password' } })).status,
      ).toBe(204);
      expect((await t.request('POST', '/api/auth/login', { body: { identifier: phone, password: 'first-password' } })).status).toBe(200);
    });

    test('send throttles: 1 a minute and 10 a day per phone, with Retry-After', async () => {
      const phone = newPhone();
      expect((await sendCode(phone, 'register')).status).toBe(202);
      const again = await sendCode(phone, 'login');
      expect(again.status).toBe(429);
      expect(again.body).toEqual({ error: 'too many codes requested; try again later' });
      expect(Number(again.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(Number(again.headers.get('retry-after'))).toBeLessThanOrEqual(60);
      for (let i = 1; i < 10; i++) {
        clock.advance(MINUTE);
        expect((await sendCode(phone, 'register')).status).toBe(202);
      }
      clock.advance(MINUTE);
      const daily = await sendCode(phone, 'register');
      expect(daily.status).toBe(429);
      expect(Number(daily.headers.get('retry-after'))).toBeGreaterThan(23 * 3600);
      clock.advance(24 * 60 * MINUTE);
      expect((await sendCode(phone, 'register')).status).toBe(202);
    });

    test('bad input is 400 and changes nothing; REGISTRATION=closed refuses register codes with 403', async () => {
      const phone = newPhone();
      for (const body of [{ phone, purpose: 'other' }, { phone: 'not a phone', purpose: 'login' }, { phone }, {}]) {
        const res = await t.request('POST', '/api/auth/phone/code', { body });
        expect(res.status).toBe(400);
        expect(typeof res.body.error).toBe('string');
      }
      expect(await codeRows(phone)).toHaveLength(0);
      expect((await login(phone, 'abcdef')).status).toBe(401);
      const closed = await createTestApp(kind, { REGISTRATION: 'closed' }, { testDb: t.testDb, clock });
      try {
        const res = await closed.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' } });
        expect(res).toMatchObject({ status: 403, body: { error: 'registration is closed on this site' } });
        expect(loggedCode(closed.logs, phone)).toBeUndefined();
      } finally {
        await closed.close();
      }
    });
  });
}

describe('wrong codes are throttled like failed logins', () => {
  test('per number+address and per address, failures only: a stranger’s guesses do not hold back the owner’s own address', async () => {
    const t = await createTestApp('postgres', { TRUST_PROXY: 'true', RATE_LIMITS: 'login=3/1m,login_address=5/1m' });
    try {
      const phone = '+8613300000001';
      const from = (address: string) => ({ 'x-forwarded-for': address });
      await t.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' }, headers: from('192.0.2.1') });
      const code = loggedCode(t.logs, phone)!;
      const guess = (address: string, c = '000000') =>
        t.request('POST', '/api/auth/phone/login', { body: { phone, code: c === code ? '111111' : c }, headers: from(address) });
      for (let i = 0; i < 3; i++) expect((await guess('198.51.100.66')).status).toBe(401);
      const limited = await guess('198.51.100.66');
      expect(limited).toMatchObject({ status: 429, body: { error: 'too many wrong codes; try again later' } });
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      // The code is not dead yet (3 tries were spent on it), and the owner's address is not limited.
      const owner = await t.request('POST', '/api/auth/phone/login', { body: { phone, code }, headers: from('192.0.2.1') });
      expect(owner.status).toBe(201);
    } finally {
      await t.close();
    }
  });
});

describe('phone codes off', () => {
  test('without SMS the site says so and the routes answer 404', async () => {
    const t = await createTestApp('postgres', { PUBLIC_URL: 'https://cpd.example.com', PAYMENT_MODE: 'sandbox' });
    try {
      expect((await t.request('GET', '/api/site')).body.features.phone_login).toBe(false);
      const res = await t.request('POST', '/api/auth/phone/code', { body: { phone: '+8613900000000', purpose: 'register' } });
      expect(res).toMatchObject({ status: 404, body: { error: 'phone codes are not enabled on this site' } });
      expect((await t.request('POST', '/api/auth/phone/login', { body: { phone: '+8613900000000', code: '123456' } })).status).toBe(404);
    } finally {
      await t.close();
    }
  });
});

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { manualClock } from '../../support/clock';

const LIMITS = { RATE_LIMITS: 'login=3/1h,login_address=6/1h,register=2/1h,twofa=3/1h' };

function expect429(res: { status: number; body: unknown; headers: Headers }) {
  expect(res.status).toBe(429);
  expect(res.body).toEqual({ error: expect.any(String) });
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
}

describe('rate limits behind a trusted proxy', () => {
  const clock = manualClock();
  let t: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  const from = (address: string) => ({ 'x-forwarded-for': `198.51.100.1, ${address}` });
  const login = (identifier: string, password: string, address: string) =>
    t.request('POST', '/api/auth/login', { body: { identifier, password }, headers: from(address) });

  beforeAll(async () => {
    t = await createTestApp('postgres', { ...LIMITS, TRUST_PROXY: 'true' }, { clock });
    user = await makeUser(t);
  });
  afterAll(() => t.close());

  test('failed logins are limited per identifier+address; the right password from another address still signs in', async () => {
    for (let i = 0; i < 3; i++) expect((await login(user.email, 'wrong password', '10.1.0.1')).status).toBe(401);
    expect429(await login(user.email.toUpperCase(), user.password, '10.1.0.1'));
    // The owner, from an address that did not fail, is not locked out by the stranger's failures.
    expect((await login(user.email, user.password, '10.1.0.9')).status).toBe(200);
    // Nor is the stranger's next address refused for this identifier before it fails itself.
    expect((await login(user.email, 'wrong password', '10.1.0.2')).status).toBe(401);
    clock.advance(60 * 60_000);
    expect((await login(user.email, user.password, '10.1.0.1')).status).toBe(200);
  });

  test('the lockout attack of the report fails: 10 wrong passwords, then the owner signs in elsewhere', async () => {
    const owner = await makeUser(t);
    for (let i = 0; i < 10; i++) await login(owner.email, 'wrong password', '10.7.0.1');
    expect429(await login(owner.email, 'wrong password', '10.7.0.1'));
    expect((await login(owner.email, owner.password, '10.7.0.2')).status).toBe(200);
  });

  test('reformatting a phone number does not get a fresh bucket', async () => {
    for (const phone of ['+1 555 010 3000', '+1-555-010-3000', '+1 (555) 0103000']) {
      expect((await login(phone, 'wrong password', '10.6.0.1')).status).toBe(401);
    }
    expect429(await login('+15550103000', 'wrong password', '10.6.0.1'));
  });

  test('failed logins are limited per client address, whatever the identifier', async () => {
    for (let i = 0; i < 6; i++) expect((await login(`nobody${i}@example.com`, 'wrong password', '10.2.0.1')).status).toBe(401);
    expect429(await login('nobody9@example.com', 'wrong password', '10.2.0.1'));
    expect((await login('nobody9@example.com', 'wrong password', '10.2.0.2')).status).toBe(401);
  });

  test('successful logins are not held against the caller', async () => {
    for (let i = 0; i < 6; i++) expect((await login(user.email, user.password, '10.3.0.1')).status).toBe(200);
  });

  test('register is limited per address; nothing is created by a refused one', async () => {
    const register = (email: string) => t.request('POST', '/api/auth/register', { body: { email, password: 'long enough' }, headers: from('10.4.0.1') });
    expect((await register('r1@example.com')).status).toBe(201);
    expect((await register('r2@example.com')).status).toBe(201);
    expect429(await register('r3@example.com'));
    const [row] = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from users where email = 'r3@example.com'`);
    expect(row!.n).toBe(0);
  });

  test('2FA verify is limited per address', async () => {
    const verify = () => t.request('POST', '/api/auth/2fa/verify', { body: { challenge_token: 'guess', code: '123456' }, headers: from('10.5.0.1') });
    for (let i = 0; i < 3; i++) expect((await verify()).status).toBe(401);
    expect429(await verify());
  });
});

describe('rate limits without TRUST_PROXY', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('postgres', LIMITS);
  });
  afterAll(() => t.close());

  test('X-Forwarded-For is ignored: forged addresses share one bucket', async () => {
    const attempt = (i: number) =>
      t.request('POST', '/api/auth/login', { body: { identifier: `p${i}@example.com`, password: 'wrong password' }, headers: { 'x-forwarded-for': `10.9.0.${i}` } });
    for (let i = 0; i < 6; i++) expect((await attempt(i)).status).toBe(401);
    expect429(await attempt(6));
  });
});

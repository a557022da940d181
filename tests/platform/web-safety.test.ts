/**
 * What a page on another site can make a signed-in browser do: nothing. Cookie-authenticated
 * writes need this site's Origin, JSON endpoints take JSON only, a stranger gets 401 before any
 * body check, and HTML pages carry the security headers.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../support/app';
import { makeUser } from '../support/make';

const SITE = 'http://localhost:8080';

describe('web safety', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  let admin: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    t = await createTestApp('postgres');
    user = await makeUser(t);
    admin = await makeUser(t, { admin: true });
  });
  afterAll(() => t.close());

  const cookie = (token: string) => ({ cookie: `cpd_session=${token}` });
  const keysOf = async (token: string) => (await t.request('GET', '/api/api-keys', { token })).body.length;

  test('a cookie write from another origin, or with no origin at all, is 403 and creates nothing', async () => {
    const before = await keysOf(user.token);
    for (const headers of [
      { ...cookie(user.token), origin: 'https://evil.example' },
      { ...cookie(user.token), origin: 'null' },
      { ...cookie(user.token), origin: 'http://localhost:8080.evil.example' },
      { ...cookie(user.token) },
      { ...cookie(user.token), 'sec-fetch-site': 'same-site' },
    ]) {
      const res = await t.request('POST', '/api/api-keys', { body: { name: 'forged' }, headers });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
    expect(await keysOf(user.token)).toBe(before);
  });

  test('the same write from this origin (Origin or Sec-Fetch-Site) works; bearer needs neither', async () => {
    expect((await t.request('POST', '/api/api-keys', { body: { name: 'a' }, headers: { ...cookie(user.token), origin: SITE } })).status).toBe(201);
    expect((await t.request('POST', '/api/api-keys', { body: { name: 'b' }, headers: { ...cookie(user.token), 'sec-fetch-site': 'same-origin' } })).status).toBe(201);
    expect((await t.request('POST', '/api/api-keys', { body: { name: 'c' }, token: user.token })).status).toBe(201);
    // Reads by cookie need no origin.
    expect((await t.request('GET', '/api/auth/me', { headers: cookie(user.token) })).status).toBe(200);
  });

  test('the form-encoded key creation of the report is refused: 415 by bearer, 403 by cookie from elsewhere', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const viaBearer = await t.request('POST', '/api/api-keys', { body: 'name=forged', token: user.token, headers: form });
    expect(viaBearer.status).toBe(415);
    expect(viaBearer.body).toEqual({ error: expect.stringContaining('application/json') });
    const viaCookie = await t.request('POST', '/api/api-keys', { body: 'name=forged', headers: { ...form, ...cookie(user.token), origin: 'https://evil.example' } });
    expect(viaCookie.status).toBe(403);
    for (const type of ['multipart/form-data; boundary=x', 'text/plain', 'application/jsonp', 'application/x-json-ish']) {
      const res = await t.request('POST', '/api/api-keys', { body: '--x\r\n\r\n--x--', token: user.token, headers: { 'content-type': type } });
      expect(res.status).toBe(415);
    }
    // application/json with parameters, and +json types, are JSON.
    expect((await t.request('POST', '/api/api-keys', { body: { name: 'd' }, token: user.token, headers: { 'content-type': 'application/json; charset=utf-8' } })).status).toBe(201);
  });

  test('a forged login from another site is refused (it would sign the victim into the attacker account)', async () => {
    const body = { identifier: user.email, password: user.password };
    const forged = await t.request('POST', '/api/auth/login', { body, headers: { origin: 'https://evil.example' } });
    expect(forged.status).toBe(403);
    expect(forged.headers.get('set-cookie')).toBeNull();
    const formLogin = await t.request('POST', '/api/auth/login', { body: `identifier=${user.email}&password=${user.password}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(formLogin.status).toBe(415);
    // curl (no Origin) and this site's own pages sign in.
    expect((await t.request('POST', '/api/auth/login', { body })).status).toBe(200);
    expect((await t.request('POST', '/api/auth/login', { body, headers: { origin: SITE } })).status).toBe(200);
  });

  test('no credential is 401 whatever the body: invalid fields, wrong types, or not JSON', async () => {
    for (const [body, type] of [
      ['{"models": "nope"}', 'application/json'],
      ['[1, 2]', 'application/json'],
      ['models=1', 'application/x-www-form-urlencoded'],
      ['{"models": [', 'application/json'],
      ['not json at all', 'application/json'],
    ] as const) {
      const res = await t.request('PUT', '/api/admin/billing/pricing/models', { body, headers: { 'content-type': type } });
      expect({ body, status: res.status }).toEqual({ body, status: 401 });
    }
    const res = await t.request('POST', '/api/billing/payments', { body: '{"amount": "lots"}' });
    expect(res.status).toBe(401);
    // A path with a parameter, and a body that is not JSON: still the auth answer first.
    expect((await t.request('PATCH', '/api/admin/users/usr_nobody', { body: '{"disabled": tru' })).status).toBe(401);
    // With the credential, the body is then checked.
    expect((await t.request('PUT', '/api/admin/billing/pricing/models', { body: '{"models": "nope"}', token: admin.token })).status).toBe(400);
    const broken = await t.request('PUT', '/api/admin/billing/pricing/models', { body: '{"models": [', token: admin.token });
    expect({ status: broken.status, body: broken.body }).toEqual({ status: 400, body: { error: 'request body is not valid JSON' } });
    // A public route keeps its 400 for a body that is not JSON.
    expect((await t.request('POST', '/api/auth/login', { body: '{"identifier":', headers: { origin: SITE } })).status).toBe(400);
  });

  test('HTML pages carry CSP, nosniff, frame and referrer headers; JSON answers are untouched', async () => {
    for (const path of ['/', '/models', '/pricing', '/api/nothing-here-but-json']) {
      const res = await t.request('GET', path);
      if (!res.headers.get('content-type')?.startsWith('text/html')) {
        expect(res.headers.get('content-security-policy')).toBeNull();
        continue;
      }
      expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('referrer-policy')).toBe('strict-origin-when-cross-origin');
      expect(res.headers.get('strict-transport-security')).toBeNull();
    }
  });

  test('HSTS when PUBLIC_URL is https', async () => {
    const https = await createTestApp('pglite', { PUBLIC_URL: 'https://cpd.example.com', PAYMENT_MODE: 'sandbox' });
    try {
      const res = await https.request('GET', '/pricing');
      expect(res.headers.get('strict-transport-security')).toStartWith('max-age=');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
    } finally {
      await https.close();
    }
  });
});

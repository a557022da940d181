/**
 * The console's HTTP side in process: hashed assets with long caching and gzip, the document's
 * language, the session gate on /console/*, the OpenAPI UI page, and the first-load budget.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { gunzipSync } from 'node:zlib';
import { chooseLanguage } from '../../src/console/console.shell';
import { createTestApp, type TestApp } from '../support/app';
import { makeUser } from '../support/make';
import { LOGIN_BUDGET_BYTES } from './budget';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp('postgres');
});
afterAll(() => t.close());

const assetsOf = (html: string) => [...html.matchAll(/(?:href|src)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);

describe('assets', () => {
  test('/login names only hashed assets of this origin, each served with a year of caching, gzip when accepted', async () => {
    const page = await t.request('GET', '/login');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(page.text).not.toMatch(/https?:\/\//);
    const assets = assetsOf(page.text);
    expect(assets.map((a) => a.replace(/-[a-z0-9]{8,}\./, '-HASH.'))).toEqual(['/assets/console-HASH.css', '/assets/console-HASH.js']);
    for (const path of assets) {
      const plain = await t.request('GET', path);
      expect(plain.status).toBe(200);
      expect(plain.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(plain.headers.get('content-type')).toMatch(path.endsWith('.js') ? /^text\/javascript/ : /^text\/css/);
      const zipped = await t.app.handle(new Request(`http://localhost${path}`, { headers: { 'accept-encoding': 'gzip, br' } }));
      expect(zipped.headers.get('content-encoding')).toBe('gzip');
      expect(new TextDecoder().decode(gunzipSync(new Uint8Array(await zipped.arrayBuffer())))).toBe(plain.text);
    }
  });

  test(`first load of /login stays within ${LOGIN_BUDGET_BYTES / 1024} KB of compressed JavaScript and CSS`, async () => {
    let total = 0;
    for (const path of assetsOf((await t.request('GET', '/login')).text)) {
      const res = await t.app.handle(new Request(`http://localhost${path}`, { headers: { 'accept-encoding': 'gzip' } }));
      total += (await res.arrayBuffer()).byteLength;
    }
    console.log(`console first load: ${total} bytes gzip (budget ${LOGIN_BUDGET_BYTES})`);
    expect(total).toBeGreaterThan(0);
    expect(total).toBeLessThanOrEqual(LOGIN_BUDGET_BYTES);
  });

  test('/favicon.ico answers 204: the site has no icon, and browsers stop asking for a while', async () => {
    const res = await t.request('GET', '/favicon.ico');
    expect(res.status).toBe(204);
    expect(res.headers.get('cache-control')).toBe('public, max-age=86400');
  });

  test('an unknown asset is 404 {error}', async () => {
    for (const path of ['/assets/console-00000000.js', '/assets/..%2Fpackage.json', '/assets/constructor']) {
      const res = await t.request('GET', path);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
  });
});

describe('the session gate', () => {
  test('/console/* without a session redirects to /login with the page to return to', async () => {
    for (const path of ['/console', '/console/usage?from=2026-01-01', '/console/admin/users']) {
      const res = await t.request('GET', path);
      expect(res.status).toBe(303);
      expect(res.headers.get('location')).toBe(`/login?next=${encodeURIComponent(path)}`);
    }
    // A session cookie that no longer signs in: the session ended, and the sign-in page is told so.
    const stale = await t.request('GET', '/console', { headers: { cookie: 'cpd_session=not-a-session' } });
    expect(stale.headers.get('location')).toBe('/login?expired=1&next=%2Fconsole');
  });

  test('a user gets the console; /console/admin/* sends a non-admin back to /console and lets an admin in', async () => {
    const user = await makeUser(t);
    const admin = await makeUser(t, { admin: true });
    const cookie = (token: string) => ({ cookie: `cpd_session=${token}` });
    expect((await t.request('GET', '/console/keys', { headers: cookie(user.token) })).status).toBe(200);
    const refused = await t.request('GET', '/console/admin/users', { headers: cookie(user.token) });
    expect(refused.status).toBe(303);
    expect(refused.headers.get('location')).toBe('/console');
    const allowed = await t.request('GET', '/console/admin/users', { headers: cookie(admin.token) });
    expect(allowed.status).toBe(200);
    expect(assetsOf(allowed.text)).toHaveLength(2);
  });
});

describe('language', () => {
  test('the China site defaults to Chinese and the international site to English', () => {
    expect(chooseLanguage('cn', null, null)).toBe('zh-CN');
    expect(chooseLanguage('intl', null, null)).toBe('en');
  });

  test("Accept-Language decides over the site's default, by its first English or Chinese preference", () => {
    expect(chooseLanguage('cn', null, 'en-US,en;q=0.9')).toBe('en');
    expect(chooseLanguage('intl', null, 'zh-TW,zh;q=0.9,en;q=0.8')).toBe('zh-CN');
    expect(chooseLanguage('intl', null, 'fr-FR,de;q=0.9,zh;q=0.5,en;q=0.7')).toBe('en');
    expect(chooseLanguage('cn', null, 'fr-FR')).toBe('zh-CN');
    expect(chooseLanguage('cn', null, 'en;q=0')).toBe('zh-CN');
  });

  test('the switch (cpd_lang cookie) decides over both', () => {
    expect(chooseLanguage('intl', 'a=1; cpd_lang=zh-CN', 'en-US')).toBe('zh-CN');
    expect(chooseLanguage('cn', 'cpd_lang=en', 'zh-CN')).toBe('en');
    expect(chooseLanguage('cn', 'cpd_lang=klingon', 'zh-CN')).toBe('zh-CN');
  });

  test('the document carries the chosen language, the site and its currency', async () => {
    const page = await t.request('GET', '/login', { headers: { 'accept-language': 'zh-CN' } });
    expect(page.text).toContain('<html lang="zh-CN" data-site="intl" data-currency="USD">');
    expect(page.headers.get('vary')).toContain('accept-language');
  });
});

describe('/api/docs', () => {
  test("the OpenAPI UI is this binary's Swagger UI, reading the spec from its absolute path", async () => {
    const page = await t.request('GET', '/api/docs');
    expect(page.status).toBe(200);
    expect(page.text).not.toMatch(/https?:\/\//);
    expect(page.text).toContain('data-spec-url="/api/docs/json"');
    const assets = assetsOf(page.text);
    expect(assets.map((a) => a.replace(/-[a-z0-9]{8,}\./, '-HASH.'))).toEqual([
      '/assets/swagger-ui-HASH.css',
      '/assets/swagger-ui-bundle-HASH.js',
      '/assets/api-docs-HASH.js',
    ]);
    for (const path of assets) expect((await t.request('GET', path)).status).toBe(200);
    const spec = await t.request('GET', '/api/docs/json');
    expect(spec.status).toBe(200);
    expect(spec.body.paths['/api/auth/login']).toBeDefined();
  });
});

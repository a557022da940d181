import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { bundleFiles, makeBundle, publish } from './support';

const XSD = join(import.meta.dir, '../../fixtures/sitemap-0.9.xsd');

/** xmllint comes from Debian's libxml2-utils; the suite needs it (no skipping). */
function xmllint(args: string[]) {
  if (!Bun.which('xmllint')) throw new Error('xmllint is missing: install the Debian package libxml2-utils (apt-get install -y libxml2-utils)');
  const r = Bun.spawnSync(['xmllint', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, out: `${r.stdout.toString()}${r.stderr.toString()}` };
}

describe('public pages and sitemap', () => {
  let t: TestApp;
  let bundle: string;
  let dir: string;
  beforeAll(async () => {
    t = await createTestApp('postgres', { PUBLIC_URL: 'https://models.example.com', PAYMENT_MODE: 'sandbox' });
    bundle = makeBundle(bundleFiles(1));
    dir = mkdtempSync(join(tmpdir(), 'cpd-sitemap-'));
    await publish(t, { path: bundle, slug: 'llama-3.1-8b', quant: 'int4', sdk: 'v1.0', name: 'Llama <3.1> & friends', family: 'llama', description: '<script>alert(1)</script>' });
    await publish(t, { path: bundle, slug: 'qwen', quant: 'int8', sdk: 'v2.1', name: 'Qwen' });
    const admin = await makeUser(t, { admin: true });
    await t.request('PUT', '/api/admin/billing/pricing/models', { token: admin.token, body: { models: [{ slug: 'qwen', unit: 'per_million_tokens', price: 0.25 }] } });
    await t.request('PUT', '/api/admin/billing/pricing/gpus', { token: admin.token, body: { gpus: [{ name: 'H100 <80GB>', hourly_price: 2.5 }] } });
  });
  afterAll(async () => {
    await t.close();
    rmSync(bundle, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  test.each(['/', '/models', '/models/qwen', '/pricing'])('%s is a small HTML page with the shared nav', async (path) => {
    const res = await t.request('GET', path);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.text).toStartWith('<!doctype html>');
    for (const href of ['/', '/models', '/pricing', '/downloads']) expect(res.text).toContain(`<a href="${href}">`);
    expect(res.text.length).toBeLessThan(20_000);
  });

  test('pages show the catalog and escape what publishers and admins typed', async () => {
    const list = await t.request('GET', '/models');
    expect(list.text).toContain('<a href="/models/llama-3.1-8b">Llama &lt;3.1&gt; &amp; friends</a>');
    expect(list.text).toContain('<a href="/models/qwen">Qwen</a>');
    const one = await t.request('GET', '/models/llama-3.1-8b');
    expect(one.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(one.text).not.toContain('<script>');
    expect(one.text).toContain('/api/models/llama-3.1-8b/download?quant=int4&amp;sdk=v1.0');
    const pricing = await t.request('GET', '/pricing');
    expect(pricing.text).toContain('0.25 USD per million tokens');
    expect(pricing.text).toContain('H100 &lt;80GB&gt;');
  });

  test('an unknown model page is an HTML 404', async () => {
    const res = await t.request('GET', '/models/nope');
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
  });

  test('the sitemap lists exactly the public pages as absolute URLs and validates against the 0.9 schema', async () => {
    const res = await t.request('GET', '/sitemap.xml');
    expect(res.status).toBe(200);
    const locs = [...res.text.matchAll(/<loc>([^<]+)<\/loc>/g)].map((m) => m[1]).sort();
    expect(locs).toEqual(
      ['/', '/downloads', '/models', '/models/llama-3.1-8b', '/models/qwen', '/pricing'].map((p) => `https://models.example.com${p}`).sort(),
    );
    for (const path of ['/models/qwen', '/pricing', '/models'])
      expect(res.text).toMatch(new RegExp(`<loc>https://models.example.com${path.replace(/\./g, '\\.')}</loc>\\s*<lastmod>\\d{4}-\\d{2}-\\d{2}T[\\d:.]+Z</lastmod>`));
    const file = join(dir, 'sitemap.xml');
    writeFileSync(file, res.text);
    const lint = xmllint(['--noout', '--schema', XSD, file]);
    expect(lint.out).toContain('validates');
    expect(lint.code).toBe(0);
  });

  test('the schema check is real: a sitemap with a relative loc fails it', () => {
    const file = join(dir, 'bad.xml');
    writeFileSync(file, '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><lastmod>2020-01-01</lastmod><loc>/models</loc></url></urlset>\n');
    expect(xmllint(['--noout', '--schema', XSD, file]).code).not.toBe(0);
  });
});

/**
 * The China site as a product (issue 42): its public pages, the console document and the sandbox
 * checkout say everything in Chinese; usage made with a key that was revoked since keeps the key's
 * name, and the cost chart above it is in yuan; an ended session lands on the sign-in page that says why.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage } from '../support/browser';
import { CONSOLE_MODEL, type ConsoleSite, startConsoleSite } from '../support/console-site';

setDefaultTimeout(180_000);

let site: ConsoleSite;
let browser: Browser;

beforeAll(async () => {
  [site, browser] = await Promise.all([startConsoleSite('cn'), launchBrowser()]);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
});

/** English a visitor of the China site saw before: headings, nav, plurals, table heads, raw units. */
const ENGLISH = /\b(Models|Pricing|Downloads|Log in|Sign up|bundles?|Prices in|per million|per_million_tokens|Model|Price|Family|Quantizations|Size|File|Digest|GPUs|No model|China)\b/;

describe('the China site in Chinese', () => {
  test('the public pages are Chinese throughout, with Log in and Sign up links', async () => {
    const { page, problems } = await openPage(browser, site.url, { locale: 'zh-CN' });
    for (const path of ['/', '/models', '/pricing', '/downloads', '/models/no-such-model']) {
      await page.goto(site.url + path);
      expect(await page.locator('html').getAttribute('lang'), path).toBe('zh-CN');
      const text = (await page.locator('body').textContent()) ?? '';
      expect(text.match(ENGLISH)?.[0] ?? null, `${path}: ${text.slice(0, 400)}`).toBeNull();
      await page.getByRole('link', { name: '登录' }).waitFor();
      await page.getByRole('link', { name: '注册' }).waitFor();
    }
    await page.goto(`${site.url}/`);
    await page.getByRole('heading', { name: 'cpd 中国站' }).waitFor();
    await page.goto(`${site.url}/pricing`);
    await page.getByRole('cell', { name: '¥2.00 每百万 token' }).waitFor();
    await page.getByRole('link', { name: '登录' }).click();
    await page.waitForURL(`${site.url}/login`);
    // The console's document before its script runs: its title and no-script text are Chinese too.
    const shell = await (await fetch(`${site.url}/login`)).text();
    expect(shell).toContain('<html lang="zh-CN"');
    expect(shell).toContain('<title>cpd 控制台</title>');
    expect(shell).toContain('<noscript>此控制台需要启用 JavaScript。');
    // The one missing model page answers 404, as it should.
    expect(problems.filter((p) => !p.includes('/models/no-such-model'))).toEqual([]);
  });

  test("usage of a revoked key still shows the key's name", async () => {
    const me = await site.call<{ id: string }>('GET', '/api/auth/me', site.adminToken);
    const credited = await site.call('POST', `/api/admin/users/${me.body.id}/adjustments`, site.adminToken, { amount: 1, reason: 'test credit' });
    expect(credited.status, JSON.stringify(credited.body)).toBeLessThan(300);
    const created = await site.call<{ id: string; key: string }>('POST', '/api/api-keys', site.adminToken, { name: '旧笔记本' });
    expect(created.status).toBe(201);
    const chat = await fetch(`${site.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${created.body.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: CONSOLE_MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(200);
    expect((await site.call('DELETE', `/api/api-keys/${created.body.id}`, site.adminToken)).status).toBe(204);
    const usage = await site.call<{ usage: Array<{ key_name: string | null; key_revoked: boolean }> }>('GET', '/api/usage', site.adminToken);
    expect(usage.body.usage[0]).toMatchObject({ key_name: '旧笔记本', key_revoked: true });

    const { page, problems } = await openPage(browser, site.url, { locale: 'zh-CN' });
    await page.context().addCookies([{ name: 'cpd_session', value: site.adminToken, url: site.url }]);
    await page.goto(`${site.url}/console/usage`);
    await page.getByTestId('usage-log').getByRole('cell', { name: '旧笔记本（已吊销）' }).waitFor();
    // The chart above the log is in the site's currency, its legend in the page's language.
    await page.getByTestId('cost-chart').locator('canvas').waitFor();
    expect(await page.locator('table.chart-data tbody td.num').allTextContents()).toEqual(['¥0.00003']);
    const legend = (await page.locator('.u-legend').textContent()) ?? '';
    expect(legend).toContain('日期');
    expect(legend).not.toMatch(/Time|am|pm|\$/);
    expect(problems).toEqual([]);
  });

  test('a session that ended sends the console to the sign-in page, which says so', async () => {
    const { page, problems } = await openPage(browser, site.url, { locale: 'zh-CN' });
    await page.context().addCookies([{ name: 'cpd_session', value: 'a-session-that-ended', url: site.url }]);
    await page.goto(`${site.url}/console/wallet`);
    await page.waitForURL(`${site.url}/login?expired=1&next=%2Fconsole%2Fwallet`);
    await page.getByRole('status').filter({ hasText: '您的会话已结束，请重新登录。' }).waitFor();
    expect(problems).toEqual([]);
  });
});

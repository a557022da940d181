/**
 * The router breaker on the console's health page, in a real browser against dist/cpd: a backend
 * that fails every request has its breaker opened by the traffic, and the operator sees it open
 * (and the steady backend's closed with its count) on "Backends and runtimes", and the change in
 * the audit log.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import OpenAI from 'openai';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage, screenshot } from '../support/browser';
import { ADMIN, CONSOLE_MODEL, type ConsoleSite, startConsoleSite } from '../support/console-site';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream';

// A story of many browser steps, each failing by itself after 20 s (openPage).
setDefaultTimeout(180_000);

let site: ConsoleSite;
let browser: Browser;
let broken: FakeUpstream;

beforeAll(async () => {
  broken = await startFakeUpstream({ models: [CONSOLE_MODEL], behaviour: { status: 500 } });
  // A long cool-down keeps the breaker open while the page is looked at; no backoff to speak of.
  const env = { ROUTER_BREAKER: '50%/2/60s/1h', ROUTER_BACKOFF: '1ms', ROUTER_BACKOFF_MAX: '1ms', ROUTER_PROBE_INTERVAL: '1h' };
  [site, browser] = await Promise.all([startConsoleSite('intl', env), launchBrowser()]);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
  await broken?.close();
});

describe('the breaker on the health page', () => {
  test('a failing backend shows its breaker open, the steady one closed; the audit log has the change', async () => {
    const added = await site.call('PUT', '/api/admin/router/backends', site.adminToken, { backends: [{ model: CONSOLE_MODEL, url: broken.url }] });
    expect(added.status).toBe(200);
    const registered = await fetch(`${site.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'breaker@example.com', password: 'a-good-password' }),
    });
    const { token, user } = (await registered.json()) as { token: string; user: { id: string } };
    const funded = await fetch(`${site.url}/api/admin/users/${user.id}/adjustments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${site.adminToken}`, 'content-type': 'application/json', 'idempotency-key': 'breaker-funds' },
      body: JSON.stringify({ amount: 5, reason: 'test funds' }),
    });
    expect(funded.status).toBe(201);
    const made = await site.call<{ key: string }>('POST', '/api/api-keys', token, { name: 'traffic' });
    const client = new OpenAI({ baseURL: `${site.url}/v1`, apiKey: made.body.key, maxRetries: 0 });
    // Shared by round robin: the broken backend's failures fail over to the steady one, until its
    // breaker opens after 2 failed attempts; then it gets nothing.
    for (let i = 0; i < 6; i++) expect((await client.chat.completions.create({ model: CONSOLE_MODEL, messages: [{ role: 'user', content: 'hi' }] })).choices[0]!.message.content).toBeTruthy();
    expect(broken.requests.filter((r) => r.path.endsWith('/chat/completions')).length).toBe(2);

    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByLabel('Email or phone').fill(ADMIN.email);
    await page.getByLabel('Password').fill(ADMIN.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${site.url}/console`);
    await page.getByRole('navigation', { name: 'Administration' }).getByRole('link', { name: 'Backends and runtimes' }).click();
    await page.getByRole('columnheader', { name: 'Breaker' }).waitFor();
    const rowOf = (url: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name: url, exact: true }) });
    await rowOf(broken.url).getByRole('cell', { name: /^Open until / }).waitFor();
    await rowOf(site.upstream.url).getByRole('cell', { name: /^Closed \(0\/\d+ failed\)$/ }).waitFor();
    await page.getByText('Each server process keeps its own breakers').waitFor();
    await screenshot(page, 'admin-breaker-open');

    await page.getByRole('navigation', { name: 'Administration' }).getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('cell', { name: 'router.breaker', exact: true }).first().waitFor();
    await page.getByRole('term').filter({ hasText: /^Failures in the window$/ }).first().waitFor();
    expect(problems).toEqual([]);
  });
});

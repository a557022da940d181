/**
 * Captures in a real browser against dist/cpd: a user makes a capturing key on the keys page, a
 * client calls the gateway with it, the Captures page lists the request, opens its request and
 * answer, replays it (with the key typed in) and shows the original and the replay side by side;
 * an operator sets the capture rules and sees everyone's captures. Each page once in Chinese.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, openPage } from '../support/browser';
import { ADMIN, CONSOLE_MODEL, type ConsoleSite, startConsoleSite } from '../support/console-site';
import { waitFor } from '../support/wait';

// A story of many browser steps, each failing by itself after 20 s (openPage).
setDefaultTimeout(180_000);

let site: ConsoleSite;
let browser: Browser;

beforeAll(async () => {
  [site, browser] = await Promise.all([startConsoleSite('intl'), launchBrowser()]);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
});

async function logIn(page: Page, email: string, password: string) {
  await page.goto(`${site.url}/login`);
  await page.getByLabel('Email or phone').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(`${site.url}/console`);
}

describe('captures in the console', () => {
  test('a capturing key, its capture, a replay and the comparison; the operator\'s rules and list', async () => {
    const registered = await fetch(`${site.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'captures@example.com', password: 'a-good-password' }),
    });
    const { token, user } = (await registered.json()) as { token: string; user: { id: string } };
    const funded = await fetch(`${site.url}/api/admin/users/${user.id}/adjustments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${site.adminToken}`, 'content-type': 'application/json', 'idempotency-key': 'captures-funds' },
      body: JSON.stringify({ amount: 5, reason: 'test funds' }),
    });
    expect(funded.status).toBe(201);

    const { page, problems } = await openPage(browser, site.url);
    await logIn(page, 'captures@example.com', 'a-good-password');
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create key' });
    const create = dialog.getByRole('form', { name: 'Create key' });
    await create.getByLabel('Name').fill('recorded');
    await create.getByLabel('Capture requests').check();
    await create.getByRole('button', { name: 'Create key' }).click();
    const key = (await dialog.getByTestId('new-key').textContent())!;
    await dialog.getByRole('button', { name: 'Close' }).click();
    await page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'recorded', exact: true }) }).getByText('captured').waitFor();
    expect((await site.call('GET', '/api/api-keys', token)).body[0].capture).toBe(true);

    const chat = await fetch(`${site.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: CONSOLE_MODEL, messages: [{ role: 'user', content: 'remember this' }] }),
    });
    expect(chat.status).toBe(200);

    // Written just after the answer, off the request path.
    await waitFor(async () => (await site.call('GET', '/api/captures', token)).body.captures.length === 1, 'the capture');
    await page.getByRole('link', { name: 'Captures' }).click();
    const rows = page.getByTestId('captures').getByRole('row');
    await rows.filter({ hasText: CONSOLE_MODEL }).first().getByRole('link', { name: 'Open' }).click();
    await page.getByText('remember this').first().waitFor();
    await page.getByRole('heading', { name: 'Answer' }).waitFor();

    const replay = page.getByRole('form', { name: 'Replay' });
    await replay.getByLabel('API key of this account (admins may leave it empty)').fill(key);
    await replay.getByRole('button', { name: 'Replay' }).click();
    const compare = page.getByTestId('compare');
    await compare.waitFor();
    const text = compare.getByRole('row').filter({ has: page.getByRole('rowheader', { name: 'Text' }) });
    expect(await text.getByRole('cell').allTextContents()).toEqual(['Hello from the fake upstream.', 'Hello from the fake upstream.']);
    const tokens = compare.getByRole('row').filter({ has: page.getByRole('rowheader', { name: 'Tokens' }) });
    expect(await tokens.getByRole('cell').allTextContents()).toEqual(['10 + 5', '10 + 5']);
    const listed = (await site.call('GET', '/api/captures', token)).body.captures;
    expect(listed.map((c: { entrypoint: string }) => c.entrypoint)).toEqual(['replay', CONSOLE_MODEL]);
    expect(listed[0].replay_of).toBe(listed[1].id);

    // The same page in Chinese.
    await page.getByLabel('Language').selectOption('zh-CN');
    await page.getByRole('heading', { name: '原始请求与重放对比' }).waitFor();
    expect(problems).toEqual([]);
    await page.context().close();

    const { page: op, problems: opProblems } = await openPage(browser, site.url);
    await logIn(op, ADMIN.email, ADMIN.password);
    await op.getByRole('link', { name: 'Capture rules' }).click();
    const rules = op.getByRole('form', { name: 'Capture rules' });
    await rules.getByRole('button', { name: 'Add row' }).click();
    await rules.getByLabel('Model 1').fill(CONSOLE_MODEL);
    await rules.getByLabel('Sample (0–1) 1').fill('0.25');
    await rules.getByLabel('Retention (days, 1–365)').fill('7');
    await rules.getByRole('button', { name: 'Save' }).click();
    await rules.getByText('Saved.').waitFor();
    expect((await site.call('GET', '/api/admin/router/capture', site.adminToken)).body).toEqual({ rules: [{ model: CONSOLE_MODEL, sample: 0.25 }], retention_days: 7 });
    await op.getByRole('link', { name: 'All captures' }).click();
    await op.getByTestId('captures').getByRole('cell', { name: user.id }).first().waitFor();
    expect(await op.getByTestId('captures').getByRole('cell', { name: user.id }).count()).toBe(2);
    expect(opProblems).toEqual([]);
    await op.context().close();
  }, 150_000);
});

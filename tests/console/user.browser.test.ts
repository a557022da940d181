/**
 * The console in a real browser against dist/cpd (international site, English): a new user signs
 * up, creates and copies a key, tops up through the sandbox card checkout, sees the balance, makes a
 * gateway call with the key (the `openai` client, as users do), and finds it in the usage log and
 * the daily cost chart. Also: the OpenAPI UI at /api/docs loads from this origin alone.
 * Every page is watched for console errors and requests to other origins.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { NobleCryptoPlugin, ScureBase32Plugin, TOTP } from 'otplib';
import type { Browser } from 'playwright-core';
import { clipboardText, launchBrowser, openPage, outlineStyle, screenshot, waitForImage } from '../support/browser';
import { CONSOLE_MODEL, type ConsoleSite, startConsoleSite } from '../support/console-site';
import { waitFor } from '../support/wait';
import { LOGIN_BUDGET_BYTES } from './budget';

// A test here is a story of many browser steps; each step fails by itself after 20 s naming what it
// waited for (openPage), so the story as a whole gets room for a slow, loaded machine.
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

describe('a new user on the international site', () => {
  test('signs up, creates a key, tops up by card, calls the gateway, and sees the call in usage and the chart', async () => {
    const { page, problems } = await openPage(browser, site.url, { permissions: ['clipboard-read', 'clipboard-write'] });
    const email = 'new-user@example.com';

    await page.goto(`${site.url}/signup`);
    expect(await page.locator('html').getAttribute('lang')).toBe('en');
    await page.getByRole('button', { name: 'Create account' }).click();
    await expect(page.getByText('Enter an email address.')).resolves;
    expect(await page.getByLabel('Email').getAttribute('aria-invalid')).toBe('true');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('a-good-password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${site.url}/console`);
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    expect(await page.getByTestId('balance').textContent()).toBe('$0.00');
    await screenshot(page, 'user-1-dashboard');

    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create key' });
    await dialog.getByLabel('Name').fill('laptop');
    await dialog.getByRole('button', { name: 'Create key' }).click();
    const key = (await dialog.getByTestId('new-key').textContent())!;
    expect(key).toMatch(/^bfvk-[0-9A-Za-z]{40}$/);
    await dialog.getByRole('button', { name: 'Copy key' }).click();
    await dialog.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await clipboardText(page)).toBe(key);
    await dialog.getByRole('button', { name: 'Close' }).click();
    await page.getByRole('cell', { name: 'laptop', exact: true }).waitFor();
    await screenshot(page, 'user-2-key');

    await page.getByRole('link', { name: 'Wallet' }).click();
    await page.getByLabel('Amount (USD)').fill('25.5');
    await page.getByRole('button', { name: 'Continue to payment' }).click();
    await page.getByText('Waiting for the payment…').first().waitFor();
    await screenshot(page, 'user-3-pending');
    const [checkout] = await Promise.all([
      page.context().waitForEvent('page'),
      page.getByRole('link', { name: 'Open the checkout page' }).click(),
    ]);
    await checkout.getByRole('button', { name: /^Pay/ }).click();
    await page.getByText('Paid: $25.50 credited to your wallet.').waitFor();
    await page.getByTestId('balance').filter({ hasText: '$25.50' }).waitFor();
    // The settled top-up frees the button for the next one without a reload.
    await page.locator('button:enabled', { hasText: 'Continue to payment' }).waitFor({ timeout: 5_000 });
    await screenshot(page, 'user-4-credited');

    const openai = new OpenAI({ apiKey: key, baseURL: `${site.url}/v1` });
    const completion = await openai.chat.completions.create({ model: CONSOLE_MODEL, messages: [{ role: 'user', content: 'hello' }] });
    expect(completion.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    await waitFor(async () => (await site.call('GET', '/v1/router/cost', key)).body.items.length > 0, 'the call in the cost report');

    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByTestId('cost-chart').locator('canvas').waitFor();
    const chartTable = page.locator('table.chart-data');
    expect(await chartTable.locator('thead th').allTextContents()).toEqual(['Day', CONSOLE_MODEL]);
    expect(await chartTable.locator('tbody td.num').allTextContents()).toEqual(['$0.00003']);
    await screenshot(page, 'user-5-usage');
    const rows = page.getByTestId('usage-log').locator('tbody tr');
    await rows.first().waitFor();
    expect(await rows.count()).toBe(1);
    const [, model, entrypoint, keyName, tokens, cost] = await rows.first().locator('td').allTextContents();
    expect({ model, entrypoint, keyName, tokens, cost }).toEqual({
      model: CONSOLE_MODEL,
      entrypoint: CONSOLE_MODEL,
      keyName: 'laptop',
      tokens: '10 + 5',
      cost: '$0.00003',
    });

    await page.getByRole('link', { name: 'Transactions' }).click();
    await page.getByRole('cell', { name: '-$0.00003' }).waitFor();
    await page.getByRole('cell', { name: '$25.50' }).waitFor();
    await page.getByRole('link', { name: 'Wallet' }).click();
    await page.getByTestId('balance').filter({ hasText: '$25.49997' }).waitFor();
    await screenshot(page, 'user-6-transactions');

    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);

  test('a first visit to /login transfers at most the budget of JavaScript and CSS; by keyboard alone, a wrong password is shown next to its field', async () => {
    const { page, problems } = await openPage(browser, site.url);
    const transferred: Array<Promise<{ url: string; bytes: number }>> = [];
    page.on('requestfinished', (request) => {
      if (['script', 'stylesheet'].includes(request.resourceType()))
        transferred.push(request.sizes().then((s) => ({ url: request.url(), bytes: s.responseBodySize })));
    });
    await page.goto(`${site.url}/login`);
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await page.waitForLoadState('networkidle');
    const loaded = await Promise.all(transferred);
    expect(loaded.map((l) => new URL(l.url).pathname.replace(/-[a-z0-9]{8,}\./, '-HASH.')).sort()).toEqual([
      '/assets/console-HASH.css',
      '/assets/console-HASH.js',
    ]);
    const total = loaded.reduce((sum, l) => sum + l.bytes, 0);
    console.log(`first load of /login from dist/cpd: ${total} bytes of JavaScript and CSS on the wire`);
    expect(total).toBeLessThanOrEqual(LOGIN_BUDGET_BYTES);

    // Keyboard only: Tab from the language switch to the fields, Enter submits; the focus ring shows.
    await page.getByLabel('Language').focus();
    await page.keyboard.press('Tab');
    await page.keyboard.type('new-user@example.com');
    expect(await outlineStyle(page.getByLabel('Email or phone'))).toBe('solid');
    await page.keyboard.press('Tab');
    await page.keyboard.type('not-the-password');
    await page.keyboard.press('Enter');
    const error = page.getByText('Wrong email, phone or password.');
    await error.waitFor();
    expect(await page.getByLabel('Password').getAttribute('aria-describedby')).toBe(await error.getAttribute('id'));
    expect(await page.getByLabel('Password').getAttribute('aria-invalid')).toBe('true');
    await screenshot(page, 'user-7-login-error');
    // The refused login is the one failed request, which chromium reports on its console.
    expect(problems).toEqual([expect.stringContaining('status of 401')]);
    await page.context().close();
  }, 60_000);
});

describe('downloads', () => {
  test("the models page links each quantization to its download, and the receipts page the paid top-up's receipt; the session cookie authenticates both", async () => {
    const bundle = mkdtempSync(join(tmpdir(), 'cpd-bundle-'));
    writeFileSync(join(bundle, 'weights.bin'), 'w'.repeat(4096));
    writeFileSync(join(bundle, 'config.json'), '{"layers": 2}');
    const published = await site.run([
      'models',
      'publish',
      bundle,
      '--slug',
      'tiny-model',
      '--quant',
      'int4',
      '--sdk',
      'v1.0',
      '--name',
      'Tiny Model',
    ]);
    rmSync(bundle, { recursive: true, force: true });
    expect(published.code).toBe(0);

    // A customer with one paid card top-up, made through the API as curl would.
    const registered = await fetch(`${site.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'downloader@example.com', password: 'a-good-password' }),
    });
    const { token } = (await registered.json()) as { token: string };
    const payment = await site.call('POST', '/api/billing/payments', token, { provider: 'card', amount: 25.5, currency: 'USD' });
    expect((await fetch(`${site.url}/api/payments/sandbox/${payment.body.id}/pay`, { method: 'POST', redirect: 'manual' })).status).toBe(
      303,
    );
    await waitFor(
      async () => (await site.call('GET', `/api/billing/payments/${payment.body.id}`, token)).body.status === 'paid',
      'the top-up to be paid',
    );

    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByLabel('Email or phone').fill('downloader@example.com');
    await page.getByLabel('Password').fill('a-good-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${site.url}/console`);

    await page.getByRole('link', { name: 'Models' }).click();
    const link = page.getByRole('link', { name: 'Download tiny-model int4' });
    const href = (await link.getAttribute('href'))!;
    expect(href).toBe('/api/models/tiny-model/download?quant=int4&sdk=v1.0');
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    expect(download.suggestedFilename()).toEndWith('.zip');
    const zipPath = join(tmpdir(), `console-${Date.now()}.zip`);
    await download.saveAs(zipPath);
    const listing = Bun.spawnSync(['unzip', '-l', zipPath]).stdout.toString();
    rmSync(zipPath, { force: true });
    expect(listing).toContain('weights.bin');
    expect(listing).toContain('config.json');
    await screenshot(page, 'user-8-models');

    await page.getByRole('link', { name: 'Receipts' }).click();
    const receipt = page.getByRole('link', { name: 'Receipt', exact: true });
    await receipt.waitFor();
    const answer = await page.request.get(site.url + (await receipt.getAttribute('href'))!);
    expect(answer.status()).toBe(200);
    expect(await answer.text()).toContain('25.50');
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});

describe('an account', () => {
  test('turns on 2FA from a QR code, keeps its recovery codes, changes its password, and signs in again with the 2FA step; every console page opens cleanly', async () => {
    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/signup`);
    await page.getByLabel('Email').fill('careful@example.com');
    await page.getByLabel('Password').fill('first-password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${site.url}/console`);

    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByRole('button', { name: 'Set up two-factor authentication' }).click();
    const qr = page.getByRole('img', { name: 'QR code for the authenticator app' });
    await waitForImage(qr);
    const secret = (await page.getByTestId('totp-secret').textContent())!;
    const totp = new TOTP({ crypto: new NobleCryptoPlugin(), base32: new ScureBase32Plugin() });
    await page.getByLabel('Code').fill(await totp.generate({ secret }));
    await page.getByRole('button', { name: 'Turn on' }).click();
    await page.getByTestId('recovery-codes').waitFor();
    const codes = await page.getByTestId('recovery-codes').locator('code').allTextContents();
    expect(codes.length).toBeGreaterThanOrEqual(8);
    await page.getByText('Two-factor authentication is on.').waitFor();
    await screenshot(page, 'account-1-2fa-on');

    // A wrong current password is said next to its field, in words (the API answers 403).
    await page.getByLabel('Current password').fill('not-my-password');
    await page.getByLabel('New password').fill('second-password');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('The current password is not right.').waitFor();
    problems.splice(0, problems.length, ...problems.filter((p) => !p.includes('status of 403')));
    await page.getByLabel('Current password').fill('first-password');
    await page.getByLabel('New password').fill('second-password');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Password changed. Other sessions were signed out.').waitFor();
    expect(await page.locator('section', { hasText: 'Sessions' }).locator('tbody tr').count()).toBe(1);

    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${site.url}/login`);
    await page.goto(`${site.url}/login?next=${encodeURIComponent('/console/account')}`);
    await page.getByLabel('Email or phone').fill('careful@example.com');
    await page.getByLabel('Password').fill('second-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByLabel('Code').fill(codes[0]!);
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.waitForURL(`${site.url}/console/account`);
    await page.getByText('Two-factor authentication is on.').waitFor();

    for (const [link, heading] of [
      ['Wallet', 'Wallet'],
      ['API keys', 'API keys'],
      ['Transactions', 'Transactions'],
      ['Usage', 'Usage'],
      ['Receipts', 'Receipts'],
      ['Models', 'Models'],
      ['Account', 'Account'],
    ]) {
      await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: link! }).click();
      await page.getByRole('heading', { level: 1, name: heading! }).waitFor();
      await page.waitForLoadState('networkidle');
    }
    expect(await page.getByRole('navigation', { name: 'Administration' }).count()).toBe(0);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 90_000);
});

describe('/api/docs', () => {
  test('shows the operations from the embedded Swagger UI, with no request to another origin', async () => {
    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/api/docs`);
    await page.getByText('/api/auth/login', { exact: true }).waitFor();
    // Swagger UI renders a document of this size as it scrolls into view: scroll down the page
    // to the gateway's operations, gathering every operation shown on the way.
    const seen = new Set<string>();
    const chat = page.getByText('/v1/chat/completions', { exact: true });
    for (let stalled = 0; !(await chat.isVisible()) && stalled < 20; ) {
      for (const path of await page.locator('.opblock-summary-path').allTextContents()) seen.add(path);
      const before = await page.evaluate('window.scrollY');
      await page.mouse.wheel(0, 1500);
      // Two frames: the scroll is painted and Swagger UI has rendered what came into view.
      await page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
      stalled = (await page.evaluate('window.scrollY')) === before ? stalled + 1 : 0;
    }
    await chat.waitFor();
    for (const path of await page.locator('.opblock-summary-path').allTextContents()) seen.add(path);
    expect(seen.size).toBeGreaterThan(40);
    await screenshot(page, 'api-docs');
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});

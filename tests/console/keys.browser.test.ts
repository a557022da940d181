/**
 * The keys page in a real browser against dist/cpd: a key is created with a spend limit, a period
 * and a requests-per-minute limit, the list shows them, an edit changes one limit and clears
 * another, and the API reports the key with exactly those limits. Mistakes are shown next to their
 * field, both the console's own checks and the server's refusals.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage } from '../support/browser';
import { type ConsoleSite, startConsoleSite } from '../support/console-site';

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

describe('API key limits on the keys page', () => {
  test('creates a key with a spend limit and rpm, lists them, edits and clears them, and the API agrees', async () => {
    const registered = await fetch(`${site.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'limits@example.com', password: 'a-good-password' }),
    });
    const { token } = (await registered.json()) as { token: string };

    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByLabel('Email or phone').fill('limits@example.com');
    await page.getByLabel('Password').fill('a-good-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${site.url}/console`);
    await page.getByRole('link', { name: 'API keys' }).click();

    // Creating happens in a dialog opened from the page.
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create key' });
    const create = dialog.getByRole('form', { name: 'Create key' });
    await create.getByLabel('Name').fill('metered');
    // The console's own check: more than 6 decimals, shown at the spend limit field.
    await create.getByLabel('Spend limit').fill('1.2345678');
    await create.getByRole('button', { name: 'Create key' }).click();
    await create.getByText('Enter an amount with at most 6 decimals.').waitFor();
    expect(await create.getByLabel('Spend limit').getAttribute('aria-invalid')).toBe('true');

    // The server's refusal of a past expiry, shown at the expiry field; no key is made.
    await create.getByLabel('Spend limit').fill('2.5');
    await create.getByLabel('Spend period').selectOption('month');
    await create.getByLabel('Requests per minute').fill('60');
    await create.getByLabel('Expires at (your time zone)').fill('2020-01-01T10:00');
    await create.getByRole('button', { name: 'Create key' }).click();
    await create.getByText('expires_at must be in the future').waitFor();
    expect(await create.getByLabel('Expires at (your time zone)').getAttribute('aria-invalid')).toBe('true');
    expect((await site.call('GET', '/api/api-keys', token)).body).toEqual([]);

    await create.getByLabel('Expires at (your time zone)').fill('');
    await create.getByRole('button', { name: 'Create key' }).click();
    await dialog.getByTestId('new-key').waitFor();
    await dialog.getByRole('button', { name: 'Close' }).click();
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'metered', exact: true }) });
    await row.getByText('$0.00 / $2.50 per month · 60 requests/min').waitFor();
    const [made] = (await site.call('GET', '/api/api-keys', token)).body;
    expect(made).toMatchObject({
      name: 'metered',
      spend_limit: 2.5,
      spend_period: 'month',
      spent: 0,
      rpm: 60,
      models: null,
      expires_at: null,
    });

    // Edit: a new limit and period, and the rpm field emptied, which clears that limit.
    await row.getByRole('button', { name: 'Edit limits of metered' }).click();
    const edit = page.getByRole('form', { name: 'Edit limits of metered' });
    expect(await edit.getByLabel('Spend limit').inputValue()).toBe('2.5');
    expect(await edit.getByLabel('Requests per minute').inputValue()).toBe('60');
    await edit.getByLabel('Spend limit').fill('10');
    await edit.getByLabel('Spend period').selectOption('day');
    await edit.getByLabel('Requests per minute').fill('');
    await edit.getByRole('button', { name: 'Save' }).click();
    await row.getByText('$0.00 / $10.00 per day', { exact: true }).waitFor();
    expect(await edit.count()).toBe(0);
    const [edited] = (await site.call('GET', '/api/api-keys', token)).body;
    expect(edited).toMatchObject({ id: made.id, spend_limit: 10, spend_period: 'day', rpm: null, models: null });

    // The one refused request (the past expiry) is the only thing the browser reports.
    expect(problems).toEqual([expect.stringContaining('status of 400')]);
    await page.context().close();
  }, 120_000);
});

/**
 * Market pricing in the console, in a real browser against dist/cpd: an operator adds a price
 * group, sets a model's token prices, places a customer in the group and creates a batch of
 * redemption codes (shown once, with the CSV to download), then disables the rest of the batch;
 * the customer sees their own prices on the models page, redeems a code on the wallet page (a
 * second try reads "invalid code"), and the usage page shows cached and reasoning tokens. Then
 * the customer's pages in Chinese.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage } from '../support/browser';
import { ADMIN, CONSOLE_MODEL, type ConsoleSite, startConsoleSite } from '../support/console-site';

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

async function logIn(page: import('playwright-core').Page, email: string, password: string) {
  await page.goto(`${site.url}/login`);
  await page.getByLabel('Email or phone').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(`${site.url}/console`);
}

describe('market pricing in the console', () => {
  test('an operator sets groups, token prices, a user group and codes; the user sees their prices and redeems a code once', async () => {
    const registered = await fetch(`${site.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'buyer@example.com', password: 'a-good-password' }),
    });
    const { token, user } = (await registered.json()) as { token: string; user: { id: string } };

    const op = await openPage(browser, site.url);
    await logIn(op.page, ADMIN.email, ADMIN.password);
    const { page } = op;

    await page.getByRole('link', { name: 'Price groups' }).click();
    const groups = page.getByRole('form', { name: 'Price groups' });
    await groups.getByRole('button', { name: 'Add row' }).click();
    await page.getByLabel('Name 2').fill('resellers');
    await page.getByLabel('Multiplier 2').fill('0.5');
    await groups.getByRole('button', { name: 'Save' }).click();
    await groups.getByText('Saved.').waitFor();

    await page.getByRole('link', { name: 'Pricing', exact: true }).click();
    await page.getByLabel('Input (USD / M) 1', { exact: true }).fill('2');
    await page.getByLabel('Output (USD / M) 1').fill('8');
    await page.getByLabel('Cached input (USD / M) 1').fill('0.5');
    const prices = page.getByRole('form', { name: 'Model prices' });
    await prices.getByRole('button', { name: 'Save' }).click();
    await prices.getByText('Saved.').waitFor();
    const catalog = (await (await fetch(`${site.url}/api/pricing`)).json()) as { models: unknown[] };
    expect(catalog.models).toEqual([expect.objectContaining({ slug: CONSOLE_MODEL, price: 2, input_price: 2, output_price: 8, cached_input_price: 0.5 })]);

    await page.goto(`${site.url}/console/admin/users/${user.id}`);
    await page.getByRole('combobox', { name: 'Price group' }).selectOption('resellers');
    await page.getByRole('button', { name: 'Set group' }).click();
    await page.getByText('Saved.').waitFor();
    expect((await site.call<{ price_group: string }>('GET', `/api/admin/users/${user.id}`, site.adminToken)).body.price_group).toBe('resellers');

    await page.getByRole('link', { name: 'Codes' }).click();
    await page.getByLabel('How many (1–1000)').fill('2');
    await page.getByLabel('Amount of each (USD)').fill('7.5');
    await page.getByRole('button', { name: 'Create codes' }).click();
    const shown = page.getByTestId('new-codes');
    await shown.getByText('They are shown only this once').waitFor();
    const codes = (await shown.locator('pre').textContent())!.split('\n');
    expect(codes).toHaveLength(2);
    const [download] = await Promise.all([page.waitForEvent('download'), shown.getByRole('link', { name: 'Download CSV' }).click()]);
    const csv = await Bun.file((await download.path())!).text();
    expect(csv.split('\r\n')[0]).toBe('code,amount,currency,expires_at,batch_id');
    expect(csv).toContain(`${codes[0]},7.5,USD,`);

    // The customer: their prices, a redemption, and the same code again.
    const buyer = await openPage(browser, site.url);
    await logIn(buyer.page, 'buyer@example.com', 'a-good-password');
    await buyer.page.goto(`${site.url}/console/wallet`); // the dashboard is the first page; redeeming is on the wallet's
    await buyer.page.getByRole('textbox', { name: 'Code' }).fill(codes[0]!.toLowerCase());
    await buyer.page.getByRole('button', { name: 'Redeem' }).click();
    await buyer.page.getByText('$7.50 was added to your balance.').waitFor();
    await buyer.page.getByTestId('balance').filter({ hasText: '$7.50' }).waitFor();
    await buyer.page.getByRole('textbox', { name: 'Code' }).fill(codes[0]!);
    await buyer.page.getByRole('button', { name: 'Redeem' }).click();
    await buyer.page.getByText('invalid code').waitFor();

    await buyer.page.getByRole('link', { name: 'Models' }).click();
    await buyer.page.getByText('Price group resellers (×0.5)').waitFor();
    const row = buyer.page.getByTestId('prices').getByRole('row', { name: new RegExp(CONSOLE_MODEL) });
    expect(await row.getByRole('cell').allTextContents()).toEqual([CONSOLE_MODEL, '$1.00', '$4.00', '$0.25', 'per million tokens']);

    // Usage with cached and reasoning tokens.
    site.upstream.set({ promptTokens: 100, cachedTokens: 40, reasoning: 'hmm ' });
    const key = await site.call<{ key: string }>('POST', '/api/api-keys', token, { name: 'k' });
    const chat = await fetch(`${site.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.body.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: CONSOLE_MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(200);
    await buyer.page.getByRole('link', { name: 'Usage' }).click();
    await buyer.page.getByText('40 cached · 1 reasoning').waitFor();

    // The operator disables the rest of the batch; the list shows one redeemed and one disabled.
    await page.getByRole('button', { name: /^Disable unused codes/ }).first().click();
    const asked = page.getByRole('dialog', { name: /^Disable every unused code of batch/ });
    await asked.getByRole('button', { name: 'Disable unused codes', exact: true }).click();
    await page.getByText('1 codes disabled.').waitFor();
    const statuses = await page.getByTestId('codes').getByRole('row').allTextContents();
    expect(statuses.some((r) => r.includes('Redeemed') && r.includes(user.id))).toBe(true);
    expect(statuses.some((r) => r.includes('Disabled'))).toBe(true);

    // In Chinese.
    await buyer.page.getByLabel('Language').selectOption('zh-CN');
    await buyer.page.getByRole('link', { name: '钱包' }).click();
    await buyer.page.getByRole('heading', { name: '使用兑换码' }).waitFor();
    expect(op.problems).toEqual([]);
    expect(buyer.problems.filter((p) => !p.includes('400') && !p.includes('Bad Request'))).toEqual([]);
  });
});

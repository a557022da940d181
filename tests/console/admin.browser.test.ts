/**
 * The console in a real browser against dist/cpd on the China site: a user's pages in Chinese
 * (the wallet QR top-up included), the language switch, and an operator (whose browser prefers
 * English) adjusting that user's balance, editing prices, refunding part of the top-up and
 * disabling the account.
 * Every page is watched for console errors and requests to other origins. The tests are the steps
 * of one story (the operator acts on the user signed up first) and run in the order written.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, openPage, screenshot, type WatchedPage, waitForImage } from '../support/browser';
import { ADMIN, CONSOLE_MODEL, type ConsoleSite, startConsoleSite } from '../support/console-site';

// A test here is a story of many browser steps; each step fails by itself after 20 s naming what it
// waited for (openPage), so the story as a whole gets room for a slow, loaded machine.
setDefaultTimeout(180_000);

const USER = { email: 'yonghu@example.com', password: 'a-good-password' };
let site: ConsoleSite;
let browser: Browser;
let user: WatchedPage;
let admin: WatchedPage;

beforeAll(async () => {
  [site, browser] = await Promise.all([startConsoleSite('cn'), launchBrowser()]);
  [user, admin] = await Promise.all([openPage(browser, site.url, { locale: 'zh-CN' }), openPage(browser, site.url, { locale: 'en-US' })]);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
});

/** On the China site /login opens on the phone code form: `usePassword` switches to the password one. */
async function logIn(page: Page, identifier: string, password: string, labels: { usePassword: string; identifier: string; password: string; submit: string }) {
  await page.goto(`${site.url}/login`);
  await page.getByRole('button', { name: labels.usePassword }).click();
  await page.getByLabel(labels.identifier).fill(identifier);
  await page.getByLabel(labels.password).fill(password);
  await page.getByRole('button', { name: labels.submit }).click();
  await page.waitForURL(`${site.url}/console`);
}

describe('the China site', () => {
  test('is in Chinese for a Chinese browser: sign up, then top up by scanning the wallet QR code', async () => {
    const { page } = user;
    await page.goto(`${site.url}/signup`);
    expect(await page.locator('html').getAttribute('lang')).toBe('zh-CN');
    await page.getByRole('heading', { name: '注册' }).waitFor();
    // Phone first on the China site; this user signs up with an email.
    await page.getByRole('button', { name: '使用邮箱和密码注册' }).click();
    await page.getByLabel('邮箱').fill(USER.email);
    await page.getByLabel('密码').fill(USER.password);
    await page.getByRole('button', { name: '创建账户' }).click();
    await page.waitForURL(`${site.url}/console`);
    await page.getByRole('heading', { name: '概览' }).waitFor();
    await page.getByRole('link', { name: '钱包' }).click();
    await page.getByRole('heading', { name: '钱包' }).waitFor();
    expect(await page.getByTestId('balance').textContent()).toBe('¥0.00');

    await page.getByLabel('金额（CNY）').fill('10');
    await page.getByRole('button', { name: '去支付' }).click();
    const qr = page.getByRole('img', { name: '用支付应用扫描的二维码' });
    await qr.waitFor();
    await waitForImage(qr);
    await page.getByRole('status').filter({ hasText: '等待支付…' }).waitFor();
    await screenshot(page, 'cn-1-qr-pending');

    // The payer's phone opens the page the QR code points at and pays there.
    const phone = await page.context().newPage();
    await phone.goto((await qr.getAttribute('src'))!.replace(/\/qr\.svg$/, ''));
    // The sandbox checkout speaks the site's language too.
    await phone.getByRole('heading', { name: '沙盒收银台' }).waitFor();
    expect(await phone.locator('body').textContent()).not.toMatch(/\b(Pay|Fail|Payment|status|Sandbox|checkout)\b/);
    await phone.getByRole('button', { name: /^支付 / }).click();
    await page.getByText('支付成功：¥10.00 已存入钱包。').waitFor();
    await page.getByTestId('balance').filter({ hasText: '¥10.00' }).waitFor();
    // Closed once the payment is through: closing the phone's page while its Pay form is still
    // posting can leave the close waiting on the navigation.
    await phone.close();
    await screenshot(page, 'cn-2-credited');

    await page.getByRole('link', { name: '发票' }).click();
    await page.getByLabel('发票抬头').fill('示例科技有限公司');
    await page.getByLabel('税号（可选）').fill('91310000MA1K000000');
    await page.getByRole('button', { name: '申请发票' }).click();
    await page.getByRole('cell', { name: '示例科技有限公司' }).waitFor();
    const invoice = await page.request.get(site.url + (await page.getByRole('link', { name: '下载' }).getAttribute('href'))!);
    expect(invoice.status()).toBe(200);
    const record = await invoice.text();
    expect(record).toContain('示例科技有限公司');
    // Not to be taken for a fapiao: it says what it is, in Beijing time rather than raw UTC.
    expect(record).toContain('开票申请记录');
    expect(record).toContain('不是发票');
    expect(record).toMatch(/申请时间 Requested at<\/th><td>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \(UTC\+8\)</);
    expect(record).not.toMatch(/\d{2}:\d{2}:\d{2}\.\d{3}Z/);
    await page.getByRole('cell', { name: '已申请，待开票' }).waitFor();
    await screenshot(page, 'cn-2b-invoice');
    expect(user.problems).toEqual([]);
  }, 60_000);

  test('the switch turns the console to English and back', async () => {
    const { page } = user;
    await page.getByRole('link', { name: '钱包' }).click();
    await page.getByRole('heading', { name: '钱包' }).waitFor();
    await page.getByLabel('语言').selectOption('en');
    await page.getByRole('heading', { name: 'Wallet' }).waitFor();
    expect(await page.locator('html').getAttribute('lang')).toBe('en');
    await page.getByLabel('Language').selectOption('zh-CN');
    await page.getByRole('heading', { name: '钱包' }).waitFor();
    expect(user.problems).toEqual([]);
  }, 30_000);
});

describe('an operator', () => {
  test('whose browser prefers English sees the China site in English, with amounts in CNY', async () => {
    await logIn(admin.page, ADMIN.email, ADMIN.password, { usePassword: 'Sign in with email or phone and password', identifier: 'Email or phone', password: 'Password', submit: 'Log in' });
    await admin.page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    expect(await admin.page.getByTestId('balance').textContent()).toBe('¥0.00');
    expect(admin.problems).toEqual([]);
  }, 30_000);

  test("adjusts a user's balance with a reason, and the user sees it", async () => {
    const { page } = admin;
    await page.getByRole('link', { name: 'Users' }).click();
    await page.getByLabel('Email or phone contains').fill('yonghu');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('link', { name: USER.email }).click();
    await page.getByTestId('user-balance').filter({ hasText: '¥10.00' }).waitFor();
    await page.getByLabel('Amount (CNY, negative to debit)').fill('12.5');
    await page.getByRole('button', { name: 'Adjust' }).click();
    await page.getByText('Required.').waitFor();
    await page.getByLabel('Reason (shown to the user)').fill('goodwill credit');
    await page.getByRole('button', { name: 'Adjust' }).click();
    await page.getByText('Balance adjusted.').waitFor();
    await page.getByTestId('user-balance').filter({ hasText: '¥22.50' }).waitFor();
    await screenshot(page, 'admin-1-adjusted');

    await user.page.goto(`${site.url}/console/transactions`);
    await user.page.getByRole('cell', { name: 'goodwill credit' }).waitFor();
    await user.page.getByRole('cell', { name: '¥12.50' }).waitFor();
    await user.page.getByRole('cell', { name: '调整' }).waitFor();
    await screenshot(user.page, 'cn-3-adjustment');
    await page.getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('cell', { name: ADMIN.email }).first().waitFor();
    expect(admin.problems).toEqual([]);
    expect(user.problems).toEqual([]);
  }, 60_000);

  test('edits a model price, which the public price list then shows, and adds a backend with a write-only key', async () => {
    const { page } = admin;
    await page.getByRole('link', { name: 'Pricing' }).click();
    const price = page.getByLabel('Price (CNY) 1');
    expect(await price.inputValue()).toBe('2');
    const prices = page.getByRole('form', { name: 'Model prices' });
    const published = async () => ((await (await fetch(`${site.url}/api/pricing`)).json()) as { models: unknown[] }).models;
    // A price finer than a micro-unit is refused with the server's reason, shown as an alert; nothing changes.
    await price.fill('0.0000004');
    await prices.getByRole('button', { name: 'Save' }).click();
    await prices.getByRole('alert').filter({ hasText: 'at most 6 decimals' }).waitFor();
    expect(await published()).toEqual([expect.objectContaining({ slug: CONSOLE_MODEL, price: 2 })]);
    // The browser logs the refused request (its 400) as a console error: that one was asked for.
    const unexpected = admin.problems.filter((p) => !p.includes('status of 400'));
    admin.problems.splice(0, admin.problems.length, ...unexpected);

    await price.fill('3.5');
    await prices.getByRole('button', { name: 'Save' }).click();
    await prices.getByText('Saved.').waitFor();
    expect(await prices.getByRole('alert').count()).toBe(0);
    expect(await published()).toEqual([
      expect.objectContaining({ slug: CONSOLE_MODEL, unit: 'per_million_tokens', price: 3.5, currency: 'CNY' }),
    ]);

    // The runtimes answer is held until the row is typed: its late arrival must not reset the form.
    let releaseRuntimes = () => {};
    const runtimesHeld = new Promise<void>((resolve) => (releaseRuntimes = resolve));
    await page.route('**/api/admin/runtimes', async (route) => {
      await runtimesHeld;
      await route.continue();
    });
    await page.getByRole('link', { name: 'Backends and runtimes' }).click();
    await page.getByRole('cell', { name: CONSOLE_MODEL, exact: true }).waitFor();
    const managed = page.getByRole('form', { name: 'Backends managed here' });
    await managed.getByRole('button', { name: 'Add row' }).click();
    await managed.getByLabel('Model 1').fill(CONSOLE_MODEL);
    await managed.getByLabel('URL 1').fill(site.upstream.url);
    await managed.getByLabel('Weight 1').fill('3');
    await managed.getByLabel('Upstream API key 1').fill('sk-upstream-secret');
    releaseRuntimes();
    await page.getByText('No supervised engines (ENGINES is not set).').waitFor();
    expect(await managed.getByLabel('Model 1').inputValue()).toBe(CONSOLE_MODEL);
    await page.unroute('**/api/admin/runtimes');
    await managed.getByRole('button', { name: 'Save' }).click();
    await managed.getByText('Saved.').waitFor();
    await page.getByRole('cell', { name: 'admin', exact: true }).waitFor();
    const listed = await site.call<{ backends: Array<Record<string, unknown>> }>('GET', '/api/admin/router/backends', site.adminToken);
    expect(listed.body.backends.filter((b) => b.source === 'admin')).toEqual([
      expect.objectContaining({ model: CONSOLE_MODEL, url: site.upstream.url, weight: 3, enabled: true, has_api_key: true }),
    ]);
    expect(JSON.stringify(listed.body)).not.toContain('sk-upstream-secret');
    await screenshot(page, 'admin-2a-backends');
    await page.getByRole('link', { name: 'Cost report' }).click();
    await page.getByRole('heading', { name: 'Cost report' }).waitFor();
    await page.getByText('No cost in this range.').waitFor();
    await screenshot(page, 'admin-2-cost');
    expect(admin.problems).toEqual([]);
  }, 60_000);

  test('opens every administration page cleanly, each showing its data', async () => {
    const { page } = admin;
    // Each page's heading, and something only its loaded data can show.
    const pages: Array<[string, () => Promise<void>]> = [
      ['Users', () => page.getByRole('link', { name: USER.email }).waitFor()],
      ['Payments', () => page.getByRole('cell', { name: USER.email }).waitFor()],
      ['Pricing', () => page.getByLabel('Model 1').waitFor()],
      ['Backends and runtimes', () => page.getByText('No supervised engines (ENGINES is not set).').waitFor()],
      ['Cost report', () => page.getByText('No cost in this range.').waitFor()],
      [
        'Audit log',
        async () => {
          await page.getByRole('cell', { name: 'wallet.adjust', exact: true }).waitFor();
          // Details are labelled values, not raw JSON.
          await page.getByRole('term').filter({ hasText: /^Balance may go negative$/ }).first().waitFor();
        },
      ],
    ];
    for (const [name, shown] of pages) {
      await page.getByRole('navigation', { name: 'Administration' }).getByRole('link', { name }).click();
      await page.getByRole('heading', { level: 1, name }).waitFor();
      await shown();
    }
    await screenshot(page, 'admin-4-audit');
    expect(admin.problems).toEqual([]);
  }, 60_000);

  test('reconciles a pending top-up from the payments page', async () => {
    const { page } = admin;
    const pending = await site.call('POST', '/api/billing/payments', site.adminToken, {
      provider: 'chat_wallet',
      amount: 3,
      currency: 'CNY',
    });
    expect(pending.status).toBe(201);
    await page.getByRole('navigation', { name: 'Administration' }).getByRole('link', { name: 'Payments' }).click();
    await page.getByRole('cell', { name: USER.email }).waitFor();
    await page.getByLabel('Status').selectOption('pending');
    await page.getByRole('button', { name: 'Apply' }).click();
    // The user's paid top-up leaves the list once the filter applies; the admin's pending one stays.
    await page.getByRole('cell', { name: USER.email }).waitFor({ state: 'detached' });
    const row = page.getByRole('row', { name: new RegExp(ADMIN.email) });
    expect(await row.count()).toBe(1);
    // The audit entry exists once the reconcile call has answered: wait for that, not for the click.
    const reconciled = page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/reconcile'));
    await row.getByRole('button', { name: 'Reconcile' }).click();
    expect((await reconciled).status()).toBe(200);
    await page.getByRole('navigation', { name: 'Administration' }).getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('cell', { name: 'payment.reconcile', exact: true }).waitFor();
    expect(admin.problems).toEqual([]);
  }, 60_000);

  test("refunds part of the user's top-up from the payments page (amount, reason, confirmation), and the user sees it", async () => {
    const { page } = admin;
    await page.getByRole('navigation', { name: 'Administration' }).getByRole('link', { name: 'Payments' }).click();
    const row = page.getByRole('row', { name: new RegExp(USER.email) });
    await row.getByRole('button', { name: 'Refund' }).click();
    const form = page.getByRole('form', { name: `Refund of the top-up ¥10.00 paid by ${USER.email}` });
    // What remains unrefunded is offered; more than that, or no reason, is refused in the form.
    expect(await form.getByLabel('Amount to refund (CNY)').inputValue()).toBe('10');
    await form.getByLabel('Amount to refund (CNY)').fill('10.5');
    await form.getByRole('button', { name: 'Send the refund' }).click();
    await form.getByText('Enter an amount above zero and at most ¥10.00, with at most 6 decimals.').waitFor();
    await form.getByText('Required.').waitFor();
    await form.getByLabel('Amount to refund (CNY)').fill('4');
    await form.getByLabel('Reason (kept in the audit log)').fill('partial refund');
    await screenshot(page, 'admin-3a-refund-form');

    // Closed, the confirmation sends nothing; confirmed, the refund is made once.
    const asked = page.getByRole('dialog', {
      name: `Refund ¥4.00 to ${USER.email}? The money goes back through chat_wallet and their wallet is debited by it.`,
    });
    await form.getByRole('button', { name: 'Send the refund' }).first().click();
    await asked.getByRole('button', { name: 'Close' }).click();
    await asked.waitFor({ state: 'hidden' });
    expect((await site.call('GET', '/api/admin/payments?status=paid', site.adminToken)).body.payments[0].refunded_amount).toBe(0);
    await form.getByRole('button', { name: 'Send the refund' }).first().click();
    const refunded = page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/refund'));
    await asked.getByRole('button', { name: 'Send the refund' }).click();
    expect((await refunded).status()).toBe(200);
    await page.getByRole('status').filter({ hasText: 'Refunded ¥4.00.' }).waitFor();
    await row.getByRole('cell', { name: '¥4.00' }).waitFor();
    await screenshot(page, 'admin-3b-refunded');

    await user.page.goto(`${site.url}/console/wallet`);
    await user.page.getByTestId('balance').filter({ hasText: '¥18.50' }).waitFor();
    const topups = user.page.getByTestId('topups');
    expect(await topups.locator('thead th').allTextContents()).toEqual(['创建时间', '金额', '支付方式', '状态', '已退款']);
    expect((await topups.locator('tbody tr').first().locator('td').allTextContents()).slice(1)).toEqual(['¥10.00', '微信支付', '已支付', '¥4.00']);
    await screenshot(user.page, 'cn-3b-refunded');
    await user.page.goto(`${site.url}/console/transactions`);
    await user.page.getByRole('cell', { name: '-¥4.00' }).waitFor();
    // The ledger's stored English descriptions are said in the page's language.
    await user.page.getByRole('cell', { name: /^支付 pay_\S+ 的退款$/ }).waitFor();
    await user.page.getByRole('cell', { name: /^充值 pay_\S+/ }).waitFor();
    await page.getByRole('navigation', { name: 'Administration' }).getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('cell', { name: 'payment.refund', exact: true }).waitFor();
    expect(admin.problems).toEqual([]);
    expect(user.problems).toEqual([]);
  }, 60_000);

  test('disables the user after a confirmation, whose next page load goes to the login page saying why', async () => {
    const { page } = admin;
    await page.getByRole('link', { name: 'Users' }).click();
    await page.getByRole('link', { name: USER.email }).click();
    // A destructive action is confirmed first: dismissing the question changes nothing.
    const asked = page.getByRole('dialog', { name: `Disable the account ${USER.email}? Its sessions end and its API keys stop working at once.` });
    await page.getByRole('button', { name: 'Disable account' }).click();
    await asked.getByRole('button', { name: 'Close' }).click();
    await asked.waitFor({ state: 'hidden' });
    await user.page.reload();
    await user.page.waitForURL(`${site.url}/console/transactions`);
    await page.getByRole('button', { name: 'Disable account' }).click();
    await asked.getByRole('button', { name: 'Disable account' }).click();
    await page.getByRole('button', { name: 'Enable account' }).waitFor();
    await screenshot(page, 'admin-3-disabled');

    await user.page.reload();
    await user.page.waitForURL(`${site.url}/login?expired=1&next=%2Fconsole%2Ftransactions`);
    await user.page.getByRole('heading', { name: '登录' }).waitFor();
    await user.page.getByRole('status').filter({ hasText: '您的会话已结束，请重新登录。' }).waitFor();
    await screenshot(user.page, 'cn-4-signed-out');
    expect(admin.problems).toEqual([]);
    expect(user.problems).toEqual([]);
  }, 60_000);
});

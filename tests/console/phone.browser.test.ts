/**
 * Phone codes in the console of the China site (dist/cpd, SMS_PROVIDER=log, the loopback default):
 * /signup and /login open on the phone code form, the "send code" button counts down, the code read
 * from the server's log signs up and in, and a password is reset by phone code from /login.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, openPage, screenshot } from '../support/browser';
import { type ConsoleSite, startConsoleSite } from '../support/console-site';
import { waitFor } from '../support/wait';

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

/** The code the log provider wrote for `phone` (E.164). */
const loggedCode = (phone: string) =>
  waitFor(
    () =>
      site.cpd
        .logs()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l))
        .findLast((l) => l.phone === phone && l.sms_code)?.sms_code as string | undefined,
    `the code for ${phone} in the log`,
  );

async function sendCode(page: Page, phone: string, e164: string) {
  await page.getByLabel('手机号', { exact: true }).fill(phone);
  await page.getByRole('button', { name: '获取验证码' }).click();
  await page.getByText('如果该号码可以使用，6 位验证码已发出，5 分钟内有效。').waitFor();
  // The button waits out the minute the server allows between two codes.
  expect(await page.getByRole('button', { name: /秒后可重新发送$/ }).isDisabled()).toBe(true);
  await page.getByLabel('短信验证码').fill((await loggedCode(e164))!);
}

describe('phone codes in the China site’s console', () => {
  test('signs up on /signup with a phone code (the first choice there)', async () => {
    const { page, problems } = await openPage(browser, site.url, { locale: 'zh-CN' });
    await page.goto(`${site.url}/signup`);
    await page.getByRole('heading', { name: '注册' }).waitFor();
    await sendCode(page, '138 0013 8000', '+8613800138000');
    await screenshot(page, 'phone-1-signup');
    await page.getByRole('button', { name: '注册', exact: true }).click();
    await page.waitForURL(`${site.url}/console`);
    await page.getByText('+8613800138000').waitFor();
    expect(problems).toEqual([]);
    await page.context().close();
  });

  test('signs in on /login with a phone code, for an account made with a bare mainland number', async () => {
    expect(
      (await site.run(['users', 'create', '--email', 'phone-owner@example.com', '--password', 'owner-password', '--phone', '13900139000']))
        .code,
    ).toBe(0);
    const { page, problems } = await openPage(browser, site.url, { locale: 'zh-CN' });
    await page.goto(`${site.url}/login`);
    await sendCode(page, '13900139000', '+8613900139000');
    await page.getByRole('button', { name: '登录', exact: true }).click();
    await page.waitForURL(`${site.url}/console`);
    await page.getByText('phone-owner@example.com').waitFor();
    expect(problems).toEqual([]);
    await page.context().close();
  });

  test('resets a password by phone code from /login, then signs in with it', async () => {
    expect(
      (await site.run(['users', 'create', '--email', 'forgetful@example.com', '--password', 'old-password', '--phone', '+8613700137000']))
        .code,
    ).toBe(0);
    const { page, problems } = await openPage(browser, site.url, { locale: 'zh-CN' });
    await page.goto(`${site.url}/login`);
    await page.getByRole('button', { name: '使用邮箱或手机号和密码登录' }).click();
    await page.getByRole('button', { name: '忘记密码？用手机验证码重置' }).click();
    await page.getByRole('heading', { name: '重置密码' }).waitFor();
    await sendCode(page, '+86 137 0013 7000', '+8613700137000');
    await page.getByLabel('新密码').fill('new-password-1');
    await page.getByRole('button', { name: '设置新密码' }).click();
    await page.getByText('新密码已设置，所有会话均已退出。请用新密码登录。').waitFor();
    await screenshot(page, 'phone-2-reset');
    await page.getByRole('button', { name: '返回登录' }).click();
    await page.getByLabel('邮箱或手机号').fill('forgetful@example.com');
    await page.getByLabel('密码', { exact: true }).fill('new-password-1');
    await page.getByRole('button', { name: '登录', exact: true }).click();
    await page.waitForURL(`${site.url}/console`);
    expect(problems).toEqual([]);
    await page.context().close();
  });
});

/**
 * The console's mail pages in a real browser against dist/cpd (China site, EMAIL_VERIFICATION
 * =required, a real SMTP server in this process): sign up in Chinese and confirm the address from
 * the mailed link; forget and reset a password from the login page in English; the "confirm your
 * email" notice resends the link; the account page sets the low-balance mail.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage, screenshot } from '../support/browser';
import { type ConsoleSite, startConsoleSite } from '../support/console-site';
import { linkIn, type SmtpServer, startSmtp } from '../support/smtp';

setDefaultTimeout(180_000);

let site: ConsoleSite;
let browser: Browser;
let smtp: SmtpServer;

beforeAll(async () => {
  smtp = await startSmtp();
  [site, browser] = await Promise.all([startConsoleSite('cn', { SMTP_URL: smtp.url, EMAIL_VERIFICATION: 'required' }), launchBrowser()]);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
  await smtp?.close();
});

/** The mailed link to `path` on this site, opened in the browser at the site's address. */
const mailedLink = (mail: Parameters<typeof linkIn>[0], path: string) => linkIn(mail, `${site.url}${path}`);

describe('mail pages of the console', () => {
  test('sign up (Chinese), check your mail, confirm the address from the link, then log in', async () => {
    const { page, problems } = await openPage(browser, site.url, { locale: 'zh-CN' });
    await page.goto(`${site.url}/signup`);
    await page.getByRole('button', { name: '使用邮箱和密码注册' }).click(); // the China site opens on the phone form
    expect(await page.locator('html').getAttribute('lang')).toBe('zh-CN');
    await page.getByLabel('邮箱').fill('xin@cn.example');
    await page.getByLabel('密码').fill('a-good-password');
    await page.getByRole('button', { name: '创建账户' }).click();
    await page.getByText('请查收邮件：我们已向 xin@cn.example 发送链接。').waitFor();
    await screenshot(page, 'mail-1-check-mail-zh');

    const mail = await smtp.next((m) => m.to === 'xin@cn.example');
    expect(mail.subject).toBe('请确认您的邮箱地址');
    await page.goto(mailedLink(mail, '/verify-email?token='));
    await page.getByText('xin@cn.example 已确认，谢谢！').waitFor();
    await screenshot(page, 'mail-2-verified-zh');

    await page.goto(`${site.url}/login`);
    await page.getByRole('button', { name: '使用邮箱或手机号和密码登录' }).click();
    await page.getByLabel('邮箱或手机号').fill('xin@cn.example');
    await page.getByLabel('密码').fill('a-good-password');
    await page.getByRole('button', { name: '登录', exact: true }).click();
    await page.waitForURL(`${site.url}/console`);
    await page.getByRole('heading', { name: '概览' }).waitFor();
    expect(await page.getByRole('button', { name: '重新发送链接' }).count()).toBe(0);
    expect(problems).toEqual([]);
  });

  test('an unverified account sees the notice and mails the link again; the account page sets the low-balance mail', async () => {
    expect((await fetch(`${site.url}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'late@cn.example', password: 'a-good-password' }) })).status).toBe(202);
    await smtp.next((m) => m.to === 'late@cn.example');
    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByRole('button', { name: 'Sign in with email or phone and password' }).click();
    await page.getByLabel('Email or phone').fill('late@cn.example');
    await page.getByLabel('Password').fill('a-good-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByText('Confirm your email late@cn.example to create API keys and top up').waitFor();
    await page.getByRole('button', { name: 'Mail the link again' }).click();
    await page.getByText('Sent. Check your inbox.').waitFor();
    await screenshot(page, 'mail-3-notice-en');
    const again = await smtp.next((m) => m.to === 'late@cn.example');
    expect(again.subject).toBe('请确认您的邮箱地址'); // the account signed up without a language: the China site's

    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByText('Email: late@cn.example (Not confirmed)').waitFor();
    await page.getByLabel('Mail me when my balance falls below (CNY)').fill('5.5');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText('Saved.').waitFor();
    await screenshot(page, 'mail-4-notifications-en');
    expect(problems).toEqual([]);
  });

  test('forgot password from the login page (English): the mailed link sets a new password', async () => {
    await site.run(['users', 'create', '--email', 'forgetful@cn.example', '--password', 'old-password-1']);
    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByRole('link', { name: 'Forgot password?' }).click();
    await page.waitForURL(`${site.url}/forgot-password`);
    await page.getByLabel('Email').fill('forgetful@cn.example');
    await page.getByRole('button', { name: 'Mail me a link' }).click();
    await page.getByText('If an account uses forgetful@cn.example, a link is on its way.').waitFor();
    await screenshot(page, 'mail-5-forgot-en');

    const mail = await smtp.next((m) => m.to === 'forgetful@cn.example');
    expect(mail.subject).toBe('重置您的密码');
    await page.goto(mailedLink(mail, '/reset-password?token='));
    await page.getByLabel('New password').fill('new-password-2');
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.getByText('Your password is set and every session was signed out.').waitFor();
    await screenshot(page, 'mail-6-reset-en');
    // The link works once.
    await page.reload();
    await page.getByLabel('New password').fill('third-password-3');
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.getByText('This link is invalid, used or expired.').waitFor();

    await page.getByRole('link', { name: 'Ask for a new link' }).waitFor();
    // The browser reports the refused second use (400) on its console: expected here.
    problems.splice(0, problems.length, ...problems.filter((p) => !p.includes('status of 400')));
    await page.goto(`${site.url}/login`);
    await page.getByRole('button', { name: 'Sign in with email or phone and password' }).click();
    await page.getByLabel('Email or phone').fill('forgetful@cn.example');
    await page.getByLabel('Password').fill('new-password-2');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${site.url}/console`);
    expect(problems).toEqual([]);
  });
});

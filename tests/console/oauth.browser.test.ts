/**
 * Sign-in with a provider in a real browser against dist/cpd, GitHub played by a local fake of its
 * OAuth web flow and REST API: the button on /login, the round trip, the console; on the account
 * page the linked provider, the last-way refusal, a first password, unlinking and linking again.
 * Navigations to the fake are expected; every other request to another origin is a problem.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { NobleCryptoPlugin, ScureBase32Plugin, TOTP } from 'otplib';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage, screenshot } from '../support/browser';
import { type ConsoleSite, startConsoleSite } from '../support/console-site';
import { startFakeGitHubOAuth } from '../support/fake-oauth';

setDefaultTimeout(180_000);

const GH = { clientId: 'console-gh-client', clientSecret: 'console-gh-secret' };
let github: ReturnType<typeof startFakeGitHubOAuth>;
let site: ConsoleSite;
let browser: Browser;

beforeAll(async () => {
  github = startFakeGitHubOAuth(GH);
  const env = {
    GITHUB_CLIENT_ID: GH.clientId,
    GITHUB_CLIENT_SECRET: GH.clientSecret,
    GITHUB_OAUTH_URL: github.url,
    GITHUB_API_URL: github.url,
  };
  [site, browser] = await Promise.all([startConsoleSite('intl', env), launchBrowser()]);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
  github?.stop();
});

const unexpected = (problems: string[]) => problems.filter((p) => !p.startsWith(`request to another origin: ${github.url}/`));

describe('sign-in with GitHub in the console', () => {
  test('the button signs up, the account page lists GitHub, refuses to unlink the last way, sets a first password, unlinks and links again', async () => {
    github.signInAs({ id: 77, login: 'browser', emails: [{ email: 'browser@gh.example', primary: true, verified: true }] });
    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByRole('link', { name: 'Sign in with GitHub' }).click();
    await page.waitForURL(`${site.url}/console`);

    await page.getByRole('link', { name: 'Account' }).click();
    const providers = page.locator('section', { has: page.getByRole('heading', { name: 'Sign-in providers' }) });
    await providers.getByRole('cell', { name: 'GitHub' }).waitFor();
    await providers.getByRole('cell', { name: 'browser@gh.example' }).waitFor();
    await screenshot(page, 'oauth-1-account');

    // Unlinking is confirmed first (every destructive action is).
    const unlink = async () => {
      await providers.getByRole('button', { name: 'Unlink' }).click();
      await page.getByRole('dialog', { name: 'Unlink GitHub? You can no longer sign in with it.' }).getByRole('button', { name: 'Unlink' }).click();
    };
    await unlink();
    await providers.getByRole('alert').filter({ hasText: 'last way to sign in' }).waitFor();

    await page.getByRole('heading', { name: 'Set a password' }).waitFor();
    await page.getByLabel('New password').fill('a-first-password');
    await page.getByRole('button', { name: 'Set a password' }).click();
    await page.getByText('Password changed. Other sessions were signed out.').waitFor();
    await unlink();
    await providers.getByText('No provider is linked to this account.').waitFor();

    await providers.getByRole('button', { name: 'Link GitHub' }).click();
    await page.waitForURL(`${site.url}/console/account?linked=github`);
    await page.getByText('GitHub is now linked: you can sign in with it.').waitFor();
    await providers.getByRole('cell', { name: 'GitHub' }).waitFor();
    // The refused unlink's 409, which the browser reports; nothing else.
    expect(unexpected(problems)).toEqual([expect.stringContaining('status of 409')]);
    await page.context().close();
  }, 90_000);

  test('a refused sign-in comes back to /login with its reason; the buttons are in Chinese too', async () => {
    github.signInAs({ id: 78, login: 'other', emails: [{ email: 'browser@gh.example', primary: true, verified: false }] });
    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByRole('link', { name: 'Sign in with GitHub' }).click();
    await page.waitForURL((url) => url.pathname === '/login' && url.searchParams.has('oauth_error'));
    await page.getByRole('alert').filter({ hasText: 'Signing in with the provider did not work' }).waitFor();
    expect(unexpected(problems)).toEqual([]);
    await page.context().close();

    const zh = await openPage(browser, site.url, { locale: 'zh-CN' });
    await zh.page.goto(`${site.url}/signup`);
    await zh.page.getByRole('link', { name: '使用 GitHub 注册' }).waitFor();
    expect(unexpected(zh.problems)).toEqual([]);
    await zh.page.context().close();
  }, 90_000);

  test('an account with 2FA signs in with GitHub, then gives its code on /login', async () => {
    github.signInAs({ id: 79, login: 'careful', emails: [{ email: 'careful@gh.example', primary: true, verified: true }] });
    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByRole('link', { name: 'Sign in with GitHub' }).click();
    await page.waitForURL(`${site.url}/console`);
    // 2FA turned on through the API with this browser's session.
    const session = (await page.context().cookies()).find((c) => c.name === 'cpd_session')!.value;
    const call = (path: string, body?: unknown) =>
      fetch(`${site.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${session}`, 'content-type': 'application/json' },
        body: JSON.stringify(body ?? {}),
      });
    const { secret } = (await (await call('/api/auth/2fa/setup')).json()) as { secret: string };
    const totp = new TOTP({ crypto: new NobleCryptoPlugin(), base32: new ScureBase32Plugin() });
    const enabled = (await (await call('/api/auth/2fa/enable', { code: await totp.generate({ secret }) })).json()) as {
      recovery_codes: string[];
    };

    // The dashboard's figures load first: a request still in flight at logout would be answered 401.
    await page.waitForLoadState('networkidle');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${site.url}/login`);
    await page.getByRole('link', { name: 'Sign in with GitHub' }).click();
    await page.getByLabel('Code').fill(enabled.recovery_codes[0]!);
    expect(new URL(page.url()).hash).toBe('');
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.waitForURL(`${site.url}/console`);
    expect(unexpected(problems)).toEqual([]);
    await page.context().close();
  }, 90_000);
});

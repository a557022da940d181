/**
 * The console as a product, in a real browser against dist/cpd (international site):
 * - onboarding: a new account's dashboard creates a key in a dialog, shows a snippet with this
 *   site's base URL and that key, and reports the first request once it is made;
 * - the playground lists the key's models, streams an answer and shows its cost; an empty wallet's 402
 *   is a sentence with a link to top up;
 * - every console page in English and Chinese: axe-core finds no serious or critical violation
 *   (light and dark), nothing scrolls sideways at 375 px, and screenshots at 1280 and 375 px,
 *   light and dark, land in test-results/console/pages/.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser, Page } from 'playwright-core';
import { axeViolations, sidewaysCulprits } from '../support/page-checks';
import { launchBrowser, openPage, screenshot } from '../support/browser';
import { CONSOLE_MODEL, type ConsoleSite, startConsoleSite } from '../support/console-site';

setDefaultTimeout(180_000);

const PUBLIC_PAGES = ['/login', '/signup', '/forgot-password'];
const CONSOLE_PAGES = [
  '/console',
  '/console/wallet',
  '/console/keys',
  '/console/playground',
  '/console/models',
  '/console/usage',
  '/console/transactions',
  '/console/receipts',
  '/console/captures',
  '/console/webhooks',
  '/console/account',
  '/console/orgs/new',
  '/console/orgs/{org}',
  '/console/orgs/{org}/audit',
  // Without a token the invite page says the link is not valid.
  '/console/invite',
  '/console/admin/users',
  '/console/admin/payments',
  '/console/admin/pricing',
  '/console/admin/price-groups',
  '/console/admin/codes',
  '/console/admin/health',
  '/console/admin/cost',
  '/console/admin/audit',
  '/console/admin/captures',
  '/console/admin/capture',
];

let site: ConsoleSite;
let browser: Browser;
let adminId: string;
/** An organization of the admin's, for its pages ({org} in CONSOLE_PAGES). */
let orgId: string;

beforeAll(async () => {
  [site, browser] = await Promise.all([startConsoleSite('intl'), launchBrowser()]);
  adminId = (await site.call<{ id: string }>('GET', '/api/auth/me', site.adminToken)).body.id;
  orgId = (await site.call<{ id: string }>('POST', '/api/orgs', site.adminToken, { name: 'Design org' })).body.id;
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
});

/** A page signed in (by default as the admin; the session cookie the sign-in form would set), in `language`. */
async function signedInPage(language: 'en' | 'zh-CN' = 'en', session = site.adminToken) {
  // bypassCSP: the console's script policy would refuse the test's own tool, axe-core, injected below.
  const watched = await openPage(browser, site.url, { locale: language === 'en' ? 'en-US' : 'zh-CN', bypassCSP: true });
  await watched.page.context().addCookies([
    { name: 'cpd_session', value: session, url: site.url, httpOnly: true },
    { name: 'cpd_lang', value: language, url: site.url },
  ]);
  return watched;
}

async function credit(amount: number) {
  const res = await fetch(`${site.url}/api/admin/users/${adminId}/adjustments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${site.adminToken}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
    body: JSON.stringify({ amount, reason: 'design test', allow_negative: true }),
  });
  expect(res.status).toBe(201);
}

/** Loaded: the page's heading is there and nothing is still marked busy (a loading placeholder). */
async function settle(page: Page) {
  await page.locator('h1').first().waitFor();
  await page.waitForFunction('!document.querySelector(\'[aria-busy="true"]\')');
}

describe('a new account', () => {
  test('onboarding: creates a key in a dialog, gets a snippet for this site, and sees its first request', async () => {
    const { page, problems } = await signedInPage();
    await page.goto(`${site.url}/console`);
    const onboarding = page.getByTestId('onboarding');
    await onboarding.getByRole('heading', { name: 'Get started' }).waitFor();
    expect(await page.getByTestId('base-url').textContent()).toBe(`${site.url}/v1`);
    expect(await page.getByTestId('snippet').textContent()).toContain('YOUR_API_KEY');

    await onboarding.getByRole('button', { name: 'Create an API key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create an API key' });
    await dialog.getByLabel('Key name').fill('onboarding');
    await dialog.getByRole('button', { name: 'Create key' }).click();
    const key = (await dialog.getByTestId('onboarding-key').textContent())!;
    expect(key).toMatch(/^bfvk-/);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'design-onboarding-dialog');
    await dialog.getByRole('button', { name: 'Close' }).click();

    const curl = (await page.getByTestId('snippet').textContent())!;
    expect(curl).toContain(`curl ${site.url}/v1/chat/completions`);
    expect(curl).toContain(`Bearer ${key}`);
    await onboarding.getByRole('button', { name: 'Python' }).click();
    expect(await page.getByTestId('snippet').textContent()).toContain(`OpenAI(base_url="${site.url}/v1", api_key="${key}")`);
    await onboarding.getByRole('button', { name: 'JavaScript' }).click();
    expect(await page.getByTestId('snippet').textContent()).toContain(`baseURL: '${site.url}/v1'`);
    await page.getByText('Waiting for your first request…').waitFor();

    // The snippet's request, as the user would run it (the model of this site in place of its first priced one).
    await credit(5);
    const res = await fetch(`${site.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: CONSOLE_MODEL, messages: [{ role: 'user', content: 'Hello' }] }),
    });
    expect(res.status).toBe(200);
    await page
      .getByTestId('first-request')
      .filter({ hasText: `First request seen: ${CONSOLE_MODEL}, $0.00003.` })
      .waitFor();
    await screenshot(page, 'design-onboarding-seen');
    expect(problems).toEqual([]);
    await page.context().close();
  });

  test('playground: streams an answer with its cost; an empty wallet is a sentence with a link to top up', async () => {
    const { page, problems } = await signedInPage();
    await credit(5);
    await page.goto(`${site.url}/console/playground`);
    await page.getByRole('button', { name: 'Create a playground key' }).click();
    await page.getByLabel('Model').selectOption(CONSOLE_MODEL);
    await page.getByLabel('Message').fill('Say hello');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByTestId('play-cost').filter({ hasText: 'cost $0.00003' }).waitFor();
    expect(await page.getByTestId('answer').textContent()).toBe('Hello from the fake upstream.');
    expect(await page.getByTestId('play-cost').textContent()).toMatch(/^\d+ \+ \d+ tokens · cost \$0\.00003$/);
    await screenshot(page, 'design-playground');

    await page.context().close();

    // A new account with an empty wallet: the gateway's 402 becomes a sentence with a link to top up.
    const broke = { email: 'broke@example.com', password: 'broke-password-1' };
    expect((await site.run(['users', 'create', '--email', broke.email, '--password', broke.password])).code).toBe(0);
    const login = await fetch(`${site.url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: broke.email, password: broke.password }),
    });
    const { token } = (await login.json()) as { token: string };
    const empty = await signedInPage('en', token);
    await empty.page.goto(`${site.url}/console/playground`);
    await empty.page.getByRole('button', { name: 'Create a playground key' }).click();
    await empty.page.getByLabel('Message').fill('Say hello');
    await empty.page.getByRole('button', { name: 'Send' }).click();
    const refusal = empty.page.getByRole('alert').filter({ hasText: 'Your balance is too low for this request.' });
    await refusal.waitFor();
    expect(await refusal.getByRole('link', { name: 'Top up' }).getAttribute('href')).toBe('/console/wallet');
    await screenshot(empty.page, 'design-playground-402');
    expect(problems).toEqual([]);
    // The gateway's 402 is an expected answer, but the browser still logs the failed fetch.
    expect(empty.problems.filter((p) => !p.includes('402'))).toEqual([]);
    await empty.page.context().close();
  });
});

describe('every console page', () => {
  for (const language of ['en', 'zh-CN'] as const)
    test(`in ${language}: no serious or critical axe violation, light and dark; nothing scrolls sideways at 375 px`, async () => {
      const { page, problems } = await signedInPage(language);
      const violations: string[] = [];
      const sideways: string[] = [];
      for (const path of [...PUBLIC_PAGES, ...CONSOLE_PAGES]) {
        // The public pages are for visitors: a session would send /login and /signup to the console.
        if (path === PUBLIC_PAGES[0]) await page.context().clearCookies({ name: 'cpd_session' });
        if (path === CONSOLE_PAGES[0])
          await page.context().addCookies([{ name: 'cpd_session', value: site.adminToken, url: site.url, httpOnly: true }]);
        await page.setViewportSize({ width: 1280, height: 800 });
        await page.emulateMedia({ colorScheme: 'light' });
        await page.goto(site.url + path.replace('{org}', orgId));
        await settle(page);
        const name = `pages/${language}${path.replaceAll('/', '-')}`;
        violations.push(...(await axeViolations(page)));
        if (path === '/console/admin/audit')
          // At 1280 px the audit log fits its box, each time on one line.
          expect(
            await page.evaluate(`(() => {
              const main = document.querySelector('main');
              return [Math.max(0, main.scrollWidth - main.clientWidth), getComputedStyle(document.querySelector('td.time')).whiteSpace];
            })()`),
          ).toEqual([0, 'nowrap']);
        if (language === 'en') await screenshot(page, `${name}-1280-light`);
        await page.emulateMedia({ colorScheme: 'dark' });
        if (language === 'en') {
          violations.push(...(await axeViolations(page)));
          await screenshot(page, `${name}-1280-dark`);
        }
        await page.setViewportSize({ width: 375, height: 800 });
        const culprits = await sidewaysCulprits(page);
        if (culprits.length) sideways.push(`${path}: ${culprits.join(' | ')}`);
        if (language === 'en') {
          await screenshot(page, `${name}-375-dark`);
          await page.emulateMedia({ colorScheme: 'light' });
          await screenshot(page, `${name}-375-light`);
        }
      }
      expect(violations).toEqual([]);
      expect(sideways).toEqual([]);
      expect(problems).toEqual([]);
      await page.context().close();
    });
});

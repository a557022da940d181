/**
 * Organizations in the console, in real browsers against dist/cpd (a site without mail, so the
 * invite's link is shown to the inviter):
 * - an owner makes an organization from the header's switch and invites a member by email; the
 *   link is shown to copy and the invite is listed as pending;
 * - the invited person opens the link in a browser of its own without a session, signs in, comes
 *   back to the link, joins and lands in the organization;
 * - the owner sees the member and sets its spend limit; the member sees that limit and no billing;
 * - the switch changes what the keys and wallet pages show, and is remembered across page loads;
 * - the organization's audit log lists what was done; axe-core finds no serious or critical
 *   violation on the new pages;
 * - on the China site in Chinese, with mail: the invite is mailed instead of shown, its link joins,
 *   the owner's low-balance mail threshold is kept across a reload and hidden from the member, and
 *   the organization's invoices page opens for its owner.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { axeViolations, sidewaysCulprits } from '../support/page-checks';
import { linkIn, type SmtpServer, startSmtp } from '../support/smtp';
import { waitFor } from '../support/wait';
import { launchBrowser, openPage, screenshot } from '../support/browser';
import { CONSOLE_MODEL, type ConsoleSite, startConsoleSite } from '../support/console-site';

setDefaultTimeout(180_000);

const OWNER = { email: 'owner@example.com', password: 'owner-password-1' };
const MEMBER = { email: 'member@example.com', password: 'member-password-1' };

let site: ConsoleSite;
let browser: Browser;

beforeAll(async () => {
  [site, browser] = await Promise.all([startConsoleSite('intl'), launchBrowser()]);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
});

async function register(account: { email: string; password: string }): Promise<{ token: string; id: string }> {
  const res = await fetch(`${site.url}/api/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(account),
  });
  expect(res.status).toBe(201);
  const { token } = (await res.json()) as { token: string };
  const me = await site.call<{ id: string }>('GET', '/api/auth/me', token);
  return { token, id: me.body.id };
}

/** Signs in with the login form on a page that shows it. */
async function signIn(page: Page, account: { email: string; password: string }) {
  await page.getByLabel('Email or phone').fill(account.email);
  await page.getByLabel('Password').fill(account.password);
  await page.getByRole('button', { name: 'Log in' }).click();
}

/** A page in a browser context of its own; bypassCSP lets axe-core be injected. */
const freshPage = () => openPage(browser, site.url, { bypassCSP: true });

describe('organizations in the console', () => {
  test('create, invite, join by link, set a member’s limit, hide billing from members, switch accounts', async () => {
    const owner = await register(OWNER);
    const member = await register(MEMBER);
    // The owner's own wallet holds $5 and one key, so the switch visibly changes both pages.
    const credited = await fetch(`${site.url}/api/admin/users/${owner.id}/adjustments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${site.adminToken}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
      body: JSON.stringify({ amount: 5, reason: 'orgs test' }),
    });
    expect(credited.status).toBe(201);
    expect((await site.call('POST', '/api/api-keys', owner.token, { name: 'personal-key' })).status).toBe(201);

    // The owner makes an organization from the header's switch.
    const { page, problems } = await freshPage();
    await page.goto(`${site.url}/login`);
    await signIn(page, OWNER);
    await page.waitForURL(`${site.url}/console`);
    const ownerSwitch = page.getByRole('combobox', { name: 'Account' });
    await ownerSwitch.selectOption({ label: 'New organization…' });
    await page.waitForURL(`${site.url}/console/orgs/new`);
    expect(await axeViolations(page)).toEqual([]);
    await page.getByLabel('Organization name').fill('Acme');
    await page.getByRole('button', { name: 'Create organization' }).click();
    await page.waitForURL(/\/console\/orgs\/org_[^/]+$/);
    const orgId = new URL(page.url()).pathname.split('/').pop()!;
    await page.getByRole('heading', { name: 'Acme', level: 1 }).waitFor();
    expect(await ownerSwitch.inputValue()).toBe(orgId);
    expect(await page.getByTestId('org-role').textContent()).toBe('Owner');

    // The invite: this site sends no mail, so the link is shown to copy, and the invite is pending.
    const inviteForm = page.getByRole('form', { name: 'Invite' });
    await inviteForm.getByLabel('Email').fill(MEMBER.email);
    await inviteForm.getByLabel('Role').selectOption('member');
    await inviteForm.getByRole('button', { name: 'Invite' }).click();
    const link = (await page.getByTestId('invite-link').textContent())!;
    expect(link.startsWith(site.url)).toBe(true);
    await page.getByTestId('invites').getByRole('cell', { name: MEMBER.email, exact: true }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'orgs-owner-invited');
    // On a phone the long link wraps inside its notice instead of pushing the page sideways.
    await page.setViewportSize({ width: 375, height: 800 });
    expect(await sidewaysCulprits(page)).toEqual([]);
    await screenshot(page, 'orgs-owner-invited-375');
    await page.setViewportSize({ width: 1280, height: 800 });

    // The invited person follows the link without a session: sign-in first, then back to the invite.
    const joining = await freshPage();
    await joining.page.goto(link);
    await joining.page.waitForURL(/\/login\?/);
    await signIn(joining.page, MEMBER);
    await joining.page.getByRole('heading', { name: 'Join an organization' }).waitFor();
    expect(await axeViolations(joining.page)).toEqual([]);
    await joining.page.getByRole('button', { name: 'Join' }).click();
    await joining.page.waitForURL(`${site.url}/console/orgs/${orgId}`);
    await joining.page.getByRole('heading', { name: 'Acme', level: 1 }).waitFor();
    expect(await joining.page.getByRole('combobox', { name: 'Account' }).inputValue()).toBe(orgId);
    expect(await joining.page.getByTestId('org-role').textContent()).toBe('Member');
    // A member manages nothing here: no invites, no changes to others, no audit log.
    expect(await joining.page.getByRole('form', { name: 'Invite' }).count()).toBe(0);
    expect(await joining.page.getByRole('button', { name: `Change role and limit of ${OWNER.email}` }).count()).toBe(0);
    expect(await joining.page.getByRole('link', { name: 'Audit log' }).count()).toBe(0);

    // The owner sees the member and gives it a monthly limit of $5.
    await page.reload();
    const memberRow = page.getByTestId('members').getByRole('row').filter({ hasText: MEMBER.email });
    await memberRow.getByRole('cell', { name: 'Member', exact: true }).waitFor();
    expect(await page.getByTestId('invites').count()).toBe(0);
    await memberRow.getByRole('button', { name: `Change role and limit of ${MEMBER.email}` }).click();
    const dialog = page.getByRole('dialog', { name: `Change role and limit of ${MEMBER.email}` });
    await dialog.getByLabel('Spend limit (USD)').fill('5');
    await dialog.getByLabel('Spend period').selectOption('month');
    expect(await axeViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Save' }).click();
    await memberRow.getByText('$0.00 / $5.00 per month').waitFor();
    const { body: listed } = await site.call<{ members: Array<{ user_id: string; spend_limit: unknown; spend_period: string }> }>(
      'GET',
      `/api/orgs/${orgId}/members`,
      owner.token,
    );
    expect(listed.members.find((m) => m.user_id === member.id)).toMatchObject({ spend_period: 'month' });
    expect(Number(listed.members.find((m) => m.user_id === member.id)!.spend_limit)).toBe(5);

    // The member's dashboard shows its limit; billing is neither in its navigation nor on the billing pages.
    const m = joining.page;
    await m.goto(`${site.url}/console`);
    await m.getByTestId('member-limit').filter({ hasText: '$5.00 per month' }).waitFor();
    expect(await axeViolations(m)).toEqual([]);
    await screenshot(m, 'orgs-member-dashboard');
    expect(await m.getByRole('link', { name: 'Wallet' }).count()).toBe(0);
    expect(await m.getByRole('link', { name: 'Transactions' }).count()).toBe(0);
    await m.goto(`${site.url}/console/wallet`);
    await m.getByTestId('billing-hidden').waitFor();
    expect(await m.getByTestId('balance').count()).toBe(0);
    expect(await axeViolations(m)).toEqual([]);
    await screenshot(m, 'orgs-member-wallet');
    // Its own account still has billing: the switch back to personal brings the pages back.
    await m.getByRole('combobox', { name: 'Account' }).selectOption({ label: 'Personal' });
    await m.getByTestId('balance').filter({ hasText: '$0.00' }).waitFor();
    await m.getByRole('link', { name: 'Wallet' }).waitFor();

    // The owner's switch changes the keys page: an organization key, then the personal key again.
    await page.goto(`${site.url}/console/keys`);
    await page.getByTestId('keys-org').waitFor();
    expect(await page.getByRole('cell', { name: 'personal-key', exact: true }).count()).toBe(0);
    await page.getByRole('button', { name: 'Create key' }).click();
    const create = page.getByRole('dialog', { name: 'Create key' });
    await create.getByLabel('Name').fill('acme-key');
    await create.getByRole('button', { name: 'Create key' }).click();
    await create.getByTestId('new-key').waitFor();
    await create.getByRole('button', { name: 'Close' }).click();
    await page.getByRole('cell', { name: 'acme-key', exact: true }).waitFor();
    // The owner sees whose each organization key is.
    await page.getByRole('row').filter({ hasText: 'acme-key' }).getByRole('cell', { name: OWNER.email, exact: true }).waitFor();
    await screenshot(page, 'orgs-owner-keys');
    const { body: orgKeys } = await site.call<Array<{ name: string; org_id: string | null }>>(
      'GET',
      `/api/api-keys?org_id=${orgId}`,
      owner.token,
    );
    expect(orgKeys.map((k) => [k.name, k.org_id])).toEqual([['acme-key', orgId]]);
    await ownerSwitch.selectOption({ label: 'Personal' });
    await page.getByRole('cell', { name: 'personal-key', exact: true }).waitFor();
    expect(await page.getByRole('cell', { name: 'acme-key', exact: true }).count()).toBe(0);
    expect(await page.getByTestId('keys-org').count()).toBe(0);

    // …and the wallet page: the personal $5, then the organization's empty wallet, still chosen after a reload.
    await page.goto(`${site.url}/console/wallet`);
    await page.getByTestId('balance').filter({ hasText: '$5.00' }).waitFor();
    await ownerSwitch.selectOption({ label: 'Acme' });
    await page.getByRole('heading', { name: 'Wallet of Acme' }).waitFor();
    await page.getByTestId('balance').filter({ hasText: '$0.00' }).waitFor();
    await page.reload();
    await page.getByRole('heading', { name: 'Wallet of Acme' }).waitFor();
    expect(await ownerSwitch.inputValue()).toBe(orgId);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'orgs-owner-wallet');

    // The owner tops up the organization's wallet through the sandbox checkout; its own keeps its $5.
    await page.getByLabel('Amount (USD)').fill('10');
    await page.getByRole('button', { name: 'Continue to payment' }).click();
    const [checkout] = await Promise.all([
      page.context().waitForEvent('page'),
      page.getByRole('link', { name: 'Open the checkout page' }).click(),
    ]);
    await checkout.getByRole('button', { name: /^Pay/ }).click();
    await page.getByText('Paid: $10.00 credited to the wallet of Acme.').waitFor();
    await page.getByTestId('balance').filter({ hasText: '$10.00' }).waitFor();
    await checkout.close();
    expect((await site.call<{ balance: number }>('GET', '/api/billing/summary', owner.token)).body.balance).toBe(5);

    // The member makes a key of the organization and calls the gateway with it: the organization pays,
    // and the owner sees what the member spent of its limit.
    await m.getByRole('combobox', { name: 'Account' }).selectOption({ label: 'Acme' });
    await m.getByRole('link', { name: 'API keys' }).click();
    await m.getByTestId('keys-org').waitFor();
    await m.getByRole('button', { name: 'Create key' }).click();
    const memberDialog = m.getByRole('dialog', { name: 'Create key' });
    await memberDialog.getByLabel('Name').fill('member-key');
    await memberDialog.getByRole('button', { name: 'Create key' }).click();
    const memberKey = (await memberDialog.getByTestId('new-key').textContent())!;
    await memberDialog.getByRole('button', { name: 'Close' }).click();
    const openai = new OpenAI({ apiKey: memberKey, baseURL: `${site.url}/v1` });
    const completion = await openai.chat.completions.create({ model: CONSOLE_MODEL, messages: [{ role: 'user', content: 'hello' }] });
    expect(completion.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    await waitFor(
      async () => (await site.call('GET', `/v1/router/cost?org_id=${orgId}&group_by=member`, owner.token)).body.items.length > 0,
      "the member's call in the organization's cost report",
    );
    // The playground, with the organization chosen, makes the organization's key too.
    await m.getByRole('link', { name: 'Playground' }).click();
    await m.getByRole('button', { name: 'Create a playground key' }).click();
    await m.getByLabel('Model').selectOption(CONSOLE_MODEL);
    const { body: memberKeys } = await site.call<Array<{ name: string }>>('GET', `/api/api-keys?org_id=${orgId}`, member.token);
    expect(memberKeys.map((k) => k.name).sort()).toEqual(['member-key', 'playground']);
    await page.goto(`${site.url}/console/orgs/${orgId}`);
    await memberRow.getByText('$0.00003 / $5.00 per month').waitFor();
    await page.goto(`${site.url}/console/usage`);
    const byMember = page.locator('figure', { hasText: 'Daily cost in USD by member' }).locator('table.chart-data');
    await byMember.locator('tbody td.num').first().waitFor();
    expect(await byMember.locator('thead th').allTextContents()).toEqual(['Day', MEMBER.email]);
    expect(await byMember.locator('tbody td.num').allTextContents()).toEqual(['$0.00003']);
    await screenshot(page, 'orgs-owner-usage');
    // The organization's other billing pages open cleanly for its owner; usage has a chart by member.
    for (const [path, heading] of [
      ['/console/usage', 'Usage'],
      ['/console/transactions', 'Transactions'],
      ['/console/receipts', 'Receipts'],
      ['/console', 'Acme'],
    ]) {
      await page.goto(site.url + path!);
      await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
      await page.waitForFunction('!document.querySelector(\'[aria-busy="true"]\')');
      expect(await axeViolations(page)).toEqual([]);
    }

    // The organization's audit log, linked for its owner.
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Audit log' }).click();
    await page.waitForURL(`${site.url}/console/orgs/${orgId}/audit`);
    await page.getByTestId('org-audit').getByRole('cell', { name: OWNER.email, exact: true }).first().waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'orgs-audit');

    // The only owner cannot leave: the refusal is a sentence, and the owner stays.
    await page.getByRole('link', { name: 'Back to the organization' }).click();
    await page.getByRole('button', { name: 'Leave organization' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Leave organization' }).click();
    await page.getByRole('alert').filter({ hasText: 'An organization needs at least one owner' }).waitFor();
    expect(await ownerSwitch.inputValue()).toBe(orgId);

    // The refused leave is the only thing the owner's browser reports.
    expect(problems).toEqual([expect.stringContaining('status of 409')]);
    expect(joining.problems).toEqual([]);
    await page.context().close();
    await joining.page.context().close();
  });

  test('someone without an account signs up from the invite link, joins as admin, and leaves again', async () => {
    const owner = await register({ email: 'founder@example.com', password: 'founder-password-1' });
    const { body: org } = await site.call<{ id: string }>('POST', '/api/orgs', owner.token, { name: 'Beta' });
    const invited = await site.call<{ link: string }>('POST', `/api/orgs/${org.id}/invites`, owner.token, {
      email: 'newcomer@example.com',
      role: 'admin',
    });
    expect(invited.status).toBe(201);

    const { page, problems } = await freshPage();
    await page.goto(invited.body.link);
    await page.waitForURL(/\/login\?/);
    // From sign-in to sign-up, the way back to the invite is kept.
    await page.getByRole('link', { name: 'No account yet? Sign up' }).click();
    await page.waitForURL(/\/signup\?/);
    await page.getByLabel('Email').fill('newcomer@example.com');
    await page.getByLabel('Password').fill('newcomer-password-1');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('button', { name: 'Join' }).click();
    await page.waitForURL(`${site.url}/console/orgs/${org.id}`);
    expect(await page.getByTestId('org-role').textContent()).toBe('Admin');
    // An admin invites members and admins, not owners.
    expect(await page.getByRole('form', { name: 'Invite' }).getByRole('option').allTextContents()).toEqual(['Admin', 'Member']);

    await page.getByRole('button', { name: 'Leave organization' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Leave organization' }).click();
    await page.waitForURL(`${site.url}/console`);
    expect(await page.getByRole('combobox', { name: 'Account' }).inputValue()).toBe('');
    expect(await page.getByRole('combobox', { name: 'Account' }).getByRole('option').allTextContents()).toEqual([
      'Personal',
      'New organization…',
    ]);
    const { body: members } = await site.call<{ members: Array<{ email: string }> }>('GET', `/api/orgs/${org.id}/members`, owner.token);
    expect(members.members.map((m) => m.email)).toEqual(['founder@example.com']);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  test('an owner renames, makes a member admin and removes it, revokes an invite, and deletes the organization', async () => {
    const owner = await register({ email: 'gamma-owner@example.com', password: 'gamma-password-1' });
    const member = await register({ email: 'gamma-member@example.com', password: 'gamma-password-2' });
    const { body: org } = await site.call<{ id: string }>('POST', '/api/orgs', owner.token, { name: 'Gamma' });
    const { body: invited } = await site.call<{ link: string }>('POST', `/api/orgs/${org.id}/invites`, owner.token, {
      email: 'gamma-member@example.com',
      role: 'member',
    });
    const token = new URL(invited.link.replace('/#/', '/')).searchParams.get('token');
    expect((await site.call('POST', '/api/orgs/invites/accept', member.token, { token })).status).toBe(200);

    const { page, problems } = await freshPage();
    await page.context().addCookies([{ name: 'cpd_session', value: owner.token, url: site.url, httpOnly: true }]);
    await page.goto(`${site.url}/console/orgs/${org.id}`);
    const rename = page.getByRole('form', { name: 'Rename' });
    await rename.getByLabel('Organization name').fill('Gamma Labs');
    await rename.getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('heading', { name: 'Gamma Labs', level: 1 }).waitFor();
    await page.getByRole('combobox', { name: 'Account' }).getByRole('option', { name: 'Gamma Labs' }).waitFor({ state: 'attached' });

    const row = page.getByTestId('members').getByRole('row').filter({ hasText: 'gamma-member@example.com' });
    await row.getByRole('button', { name: 'Change role and limit of gamma-member@example.com' }).click();
    const dialog = page.getByRole('dialog', { name: 'Change role and limit of gamma-member@example.com' });
    await dialog.getByLabel('Role', { exact: true }).selectOption('admin');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await row.getByRole('cell', { name: 'Admin', exact: true }).waitFor();
    await row.getByRole('button', { name: 'Remove gamma-member@example.com' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await row.waitFor({ state: 'detached' });

    const inviteForm = page.getByRole('form', { name: 'Invite' });
    await inviteForm.getByLabel('Email').fill('nobody@example.com');
    await inviteForm.getByRole('button', { name: 'Invite' }).click();
    await page.getByRole('button', { name: 'Revoke the invite of nobody@example.com' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('No pending invites.').waitFor();
    expect((await site.call<{ invites: unknown[] }>('GET', `/api/orgs/${org.id}/invites`, owner.token)).body.invites).toEqual([]);

    await page.getByRole('button', { name: 'Delete organization' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete organization' }).click();
    await page.waitForURL(`${site.url}/console`);
    expect(await page.getByRole('combobox', { name: 'Account' }).inputValue()).toBe('');
    expect((await site.call<{ orgs: unknown[] }>('GET', '/api/orgs', owner.token)).body.orgs).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  test('a used or made-up invite link says so instead of joining', async () => {
    const { token } = await register({ email: 'stranger@example.com', password: 'stranger-password-1' });
    const { page, problems } = await freshPage();
    await page.context().addCookies([{ name: 'cpd_session', value: token, url: site.url, httpOnly: true }]);
    await page.goto(`${site.url}/console/invite?token=not-a-real-token`);
    await page.getByRole('button', { name: 'Join' }).click();
    await page.getByRole('alert').filter({ hasText: 'This invite link is not valid' }).waitFor();
    expect((await site.call<{ orgs: unknown[] }>('GET', '/api/orgs', token)).body.orgs).toEqual([]);
    // The refused accept is the only thing the browser reports.
    expect(problems).toEqual([expect.stringContaining('status of 400')]);
    await page.context().close();
  });
});

describe('organizations on the China site, with mail', () => {
  let cn: ConsoleSite;
  let smtp: SmtpServer;
  beforeAll(async () => {
    smtp = await startSmtp();
    cn = await startConsoleSite('cn', { SMTP_URL: smtp.url });
  }, 120_000);
  afterAll(async () => {
    await cn?.stop();
    await smtp?.close();
  });

  /** A signed-in page in Chinese (the session cookie the sign-in form would set). */
  async function chinesePage(token: string) {
    const watched = await openPage(browser, cn.url, { locale: 'zh-CN', bypassCSP: true });
    await watched.page.context().addCookies([
      { name: 'cpd_session', value: token, url: cn.url, httpOnly: true },
      { name: 'cpd_lang', value: 'zh-CN', url: cn.url },
    ]);
    return watched;
  }

  async function registerOn(email: string) {
    const res = await fetch(`${cn.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'a-good-password-1' }),
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { token: string }).token;
  }

  test('the invite is mailed, not shown; its link joins; the invoices page is the organization’s', async () => {
    const ownerToken = await registerOn('laoban@cn.example');
    const guestToken = await registerOn('xiaowang@cn.example');
    const { body: org } = await cn.call<{ id: string }>('POST', '/api/orgs', ownerToken, { name: '甲公司' });

    const owner = await chinesePage(ownerToken);
    await owner.page.goto(`${cn.url}/console/orgs/${org.id}`);
    const invite = owner.page.getByRole('form', { name: '邀请' });
    await invite.getByLabel('邮箱').fill('xiaowang@cn.example');
    await invite.getByRole('button', { name: '邀请' }).click();
    await owner.page.getByText('邀请邮件已发送至 xiaowang@cn.example。').waitFor();
    expect(await owner.page.getByTestId('invite-link').count()).toBe(0);
    expect(await axeViolations(owner.page)).toEqual([]);
    await screenshot(owner.page, 'orgs-cn-mailed');

    // The owner sets the organization's low-balance mail threshold; a reload shows it kept.
    const lowBalance = /余额低于此金额时发邮件提醒所有者和管理员/;
    const notifications = owner.page.getByRole('form', { name: '通知' });
    await notifications.getByLabel(lowBalance).fill('2.5');
    await notifications.getByRole('button', { name: '保存' }).click();
    await notifications.getByRole('status').getByText('已保存').waitFor();
    await owner.page.reload();
    expect(await owner.page.getByLabel(lowBalance).inputValue()).toBe('2.5');
    expect((await cn.call<{ low_balance: string }>('GET', `/api/orgs/${org.id}/notifications`, ownerToken)).body.low_balance).toMatch(/^2\.50*$/);
    expect(await axeViolations(owner.page)).toEqual([]);

    const mail = await smtp.next((m) => m.to === 'xiaowang@cn.example' && m.text.includes('/console/'), 'the invite');
    const guest = await chinesePage(guestToken);
    await guest.page.goto(linkIn(mail, `${cn.url}/console/`));
    await guest.page.getByRole('heading', { name: '加入组织' }).waitFor();
    expect(await axeViolations(guest.page)).toEqual([]);
    await guest.page.getByRole('button', { name: '加入', exact: true }).click();
    await guest.page.waitForURL(`${cn.url}/console/orgs/${org.id}`);
    expect(await guest.page.getByTestId('org-role').textContent()).toBe('成员');
    // A member is not mailed about the organization's balance, so the setting is not shown to it.
    await guest.page.getByRole('heading', { name: '成员', level: 2 }).waitFor();
    expect(await guest.page.getByRole('form', { name: '通知' }).count()).toBe(0);

    // The owner's invoices page reads the organization's payments and invoices.
    // Opening the organization's page by its address chose it: the navigation and the switch say so.
    await owner.page.getByRole('link', { name: '成员与设置' }).waitFor();
    expect(await owner.page.getByRole('combobox', { name: '账户' }).inputValue()).toBe(org.id);
    await owner.page.getByRole('link', { name: '发票' }).click();
    await owner.page.getByRole('heading', { name: '发票', level: 1 }).waitFor();
    await owner.page.waitForFunction('!document.querySelector(\'[aria-busy="true"]\')');
    expect(await axeViolations(owner.page)).toEqual([]);

    expect(owner.problems).toEqual([]);
    expect(guest.problems).toEqual([]);
    await owner.page.context().close();
    await guest.page.context().close();
  });
});

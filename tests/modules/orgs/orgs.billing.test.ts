/**
 * An organization's billing on both sites: a top-up of its wallet by an owner (sandbox checkout),
 * its payment page followed without org_id, receipts (international site) and invoices (China
 * site) of the organization's payment, and members and strangers refused (403, 404).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';

type User = Awaited<ReturnType<typeof makeUser>>;

async function orgOf(t: TestApp) {
  const [owner, member, stranger] = await Promise.all([makeUser(t), makeUser(t), makeUser(t)]);
  const org = (await t.request('POST', '/api/orgs', { token: owner.token, body: { name: 'Billing' } })).body.id as string;
  const invite = await t.request('POST', `/api/orgs/${org}/invites`, { token: owner.token, body: { email: member.email, role: 'member' } });
  const token = /token=([\w-]+)/.exec(invite.body.link)![1];
  expect((await t.request('POST', '/api/orgs/invites/accept', { token: member.token, body: { token } })).status).toBe(200);
  return { owner, member, stranger, org };
}

async function topUp(t: TestApp, payer: User, org: string, body: Record<string, unknown>) {
  const created = await t.request('POST', '/api/billing/payments', { token: payer.token, body: { ...body, org_id: org } });
  expect(created.status).toBe(201);
  expect((await t.request('POST', `/api/payments/sandbox/${created.body.id}/pay`)).status).toBe(303);
  return created.body.id as string;
}

describe('an organization paying, international site (postgres)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('postgres', { SITE: 'intl' });
  });
  afterAll(() => t.close());

  test('the owner tops up the organization; its payment and receipt are the organization’s', async () => {
    const { owner, member, stranger, org } = await orgOf(t);
    const id = await topUp(t, owner, org, { provider: 'card', amount: 20, currency: 'USD' });
    expect((await t.request('GET', `/api/billing/wallet?org_id=${org}`, { token: owner.token })).body.balance).toBe(20);
    expect((await t.request('GET', '/api/billing/wallet', { token: owner.token })).body.balance).toBe(0);
    expect((await t.request('GET', `/api/billing/summary?org_id=${org}`, { token: owner.token })).body).toMatchObject({ balance: 20, total_topups: 20 });
    const list = await t.request('GET', `/api/billing/payments?org_id=${org}`, { token: owner.token });
    expect(list.body.payments.map((p: { id: string }) => p.id)).toEqual([id]);
    expect((await t.request('GET', '/api/billing/payments', { token: owner.token })).body.payments).toEqual([]);
    // A checkout's return, without org_id.
    expect((await t.request('GET', `/api/billing/payments/${id}`, { token: owner.token })).body.status).toBe('paid');
    const receipt = await t.request('GET', `/api/billing/receipts/${id}/download?org_id=${org}`, { token: owner.token });
    expect(receipt.status).toBe(200);
    expect(receipt.headers.get('content-disposition')).toContain(`receipt-${id}.html`);
    expect((await t.request('GET', `/api/billing/receipts/${id}/download`, { token: owner.token })).status).toBe(200);

    for (const path of [`/api/billing/payments/${id}?org_id=${org}`, `/api/billing/receipts/${id}/download?org_id=${org}`, `/api/billing/summary?org_id=${org}`]) {
      expect((await t.request('GET', path, { token: member.token })).status).toBe(403);
      expect((await t.request('GET', path, { token: stranger.token })).status).toBe(404);
    }
    // Without org_id, someone else's payment is not found, as any foreign payment.
    expect((await t.request('GET', `/api/billing/payments/${id}`, { token: member.token })).status).toBe(404);
    expect((await t.request('GET', `/api/billing/receipts/${id}/download`, { token: stranger.token })).status).toBe(404);
    expect((await t.request('POST', '/api/billing/payments', { token: member.token, body: { provider: 'card', amount: 20, currency: 'USD', org_id: org } })).status).toBe(403);
  });
});

describe('an organization paying, China site (postgres)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('postgres', { SITE: 'cn' });
  });
  afterAll(() => t.close());

  test('invoices of the organization’s payments are issued and listed for its owners and admins', async () => {
    const { owner, member, org } = await orgOf(t);
    const id = await topUp(t, owner, org, { provider: 'app_wallet', amount: 66.6, currency: 'CNY' });
    expect((await t.request('GET', `/api/orgs/${org}`, { token: owner.token })).body.currency).toBe('CNY');
    const refused = await t.request('POST', '/api/billing/invoices', { token: owner.token, body: { payment_id: id, title: '某某公司' } });
    expect(refused.status).toBe(404);
    const invoice = await t.request('POST', '/api/billing/invoices', { token: owner.token, body: { payment_id: id, title: '北京某某科技有限公司', org_id: org } });
    expect(invoice.status).toBe(201);
    expect(invoice.body).toMatchObject({ payment_id: id, amount: 66.6, currency: 'CNY' });
    expect((await t.request('GET', `/api/billing/invoices?org_id=${org}`, { token: owner.token })).body.invoices).toEqual([invoice.body]);
    expect((await t.request('GET', '/api/billing/invoices', { token: owner.token })).body.invoices).toEqual([]);
    expect((await t.request('GET', `/api/billing/invoices/${id}/download?org_id=${org}`, { token: owner.token })).status).toBe(200);
    expect((await t.request('GET', `/api/billing/invoices?org_id=${org}`, { token: member.token })).status).toBe(403);
    expect((await t.request('POST', '/api/billing/invoices', { token: member.token, body: { payment_id: id, title: 'x', org_id: org } })).status).toBe(403);
  });
});

/**
 * An organization's money as its owners and admins and the platform admin see it: each top-up
 * paid, refund and its reversal, invoice issued and admin adjustment is an entry of the
 * organization's audit log (and of the platform's); payment and refund mails go to its owners and
 * admins with its name, and so is its balance falling below the threshold they set; the platform admin lists organizations with their balances, reads one
 * with its members and ledger, and adjusts its wallet (404 for anything that is not a live
 * organization). Every balance equals the sum of its ledger.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { type SmtpServer, startSmtp } from '../../support/smtp';
import { waitFor } from '../../support/wait';

type User = Awaited<ReturnType<typeof makeUser>>;

/** An organization with an owner, an admin and a member (invited and accepted through the API). */
async function orgOf(t: TestApp, name: string, emails: { owner?: string; admin?: string; member?: string } = {}) {
  const [owner, admin, member] = await Promise.all([makeUser(t, { email: emails.owner }), makeUser(t, { email: emails.admin }), makeUser(t, { email: emails.member })]);
  const org = (await t.request('POST', '/api/orgs', { token: owner.token, body: { name } })).body.id as string;
  for (const [who, role] of [
    [admin, 'admin'],
    [member, 'member'],
  ] as const) {
    const invite = await t.request('POST', `/api/orgs/${org}/invites`, { token: owner.token, body: { email: who.email, role } });
    expect(invite.status).toBe(201);
    const token = await inviteToken(t, invite.body);
    expect((await t.request('POST', '/api/orgs/invites/accept', { token: who.token, body: { token } })).status).toBe(200);
  }
  return { owner, admin, member, org };
}

/** The invite's token: from the answer's link when mail is off, else from the mailed link (the test's SMTP server). */
let smtpOf: SmtpServer | null = null;
async function inviteToken(_t: TestApp, invite: { email: string; link?: string }) {
  if (invite.link) return /token=([\w-]+)/.exec(invite.link)![1]!;
  const mail = await smtpOf!.next((m) => m.to === invite.email && m.text.includes('token='), `invite to ${invite.email}`);
  return /token=([\w-]+)/.exec(mail.text)![1]!;
}

async function topUp(t: TestApp, payer: User, org: string, body: Record<string, unknown>) {
  const created = await t.request('POST', '/api/billing/payments', { token: payer.token, body: { ...body, org_id: org } });
  expect(created.status).toBe(201);
  expect((await t.request('POST', `/api/payments/sandbox/${created.body.id}/pay`)).status).toBe(303);
  return created.body.id as string;
}

const orgAudit = async (t: TestApp, who: User, org: string) => {
  const res = await t.request('GET', `/api/orgs/${org}/audit?limit=200`, { token: who.token });
  expect(res.status).toBe(200);
  return res.body.entries as Array<{ actor_email: string | null; action: string; target: string; details: Record<string, unknown> }>;
};

async function ledgerMatches(t: TestApp, walletId: string) {
  const [w] = await t.ctx.database.query<{ balance: string | null; sum: string | null }>(sql`
    select (select balance_micros from wallets where user_id = ${walletId})::text as balance,
           (select sum(amount_micros) from wallet_transactions where user_id = ${walletId})::text as sum`);
  expect(w!.balance ?? '0').toBe(w!.sum ?? '0');
}

describe('an organization’s money, international site with mail (postgres)', () => {
  let t: TestApp;
  let smtp: SmtpServer;
  let platformAdmin: User;
  beforeAll(async () => {
    smtp = await startSmtp();
    smtpOf = smtp;
    t = await createTestApp('postgres', { SITE: 'intl', SMTP_URL: smtp.url, MAIL_FROM: 'cpd <noreply@mail.example>' });
    platformAdmin = await makeUser(t, { admin: true });
  });
  afterAll(async () => {
    await t.close();
    await smtp.close();
  });

  test('a top-up paid and its refund are audit entries of the organization, and mailed to its owners and admins with its name', async () => {
    const { owner, admin, member, org } = await orgOf(t, 'Acme Research', { owner: 'owner@acme.example', admin: 'admin@acme.example', member: 'member@acme.example' });
    const id = await topUp(t, admin, org, { provider: 'card', amount: 25, currency: 'USD' });

    for (const address of ['owner@acme.example', 'admin@acme.example']) {
      const mail = await smtp.next((m) => m.to === address && m.subject === 'Payment received for Acme Research: $25.00', `payment mail to ${address}`);
      expect(mail.text).toContain(id);
      expect(mail.text).toContain('Acme Research');
      expect(mail.text).toContain(`/api/billing/receipts/${id}/download`);
    }
    const paid = (await orgAudit(t, owner, org)).find((e) => e.action === 'org.payment.paid');
    expect(paid).toEqual({
      id: expect.any(String),
      actor_email: 'admin@acme.example',
      action: 'org.payment.paid',
      target: org,
      details: { payment_id: id, provider: 'card', amount: 25, currency: 'USD' },
      created_at: expect.any(String),
    } as never);
    // The admin's own view, and the platform's log, hold the same entry; a member may not read the log.
    expect((await orgAudit(t, admin, org)).map((e) => e.action)).toContain('org.payment.paid');
    expect((await t.request('GET', `/api/orgs/${org}/audit`, { token: member.token })).status).toBe(403);
    const platform = await t.request('GET', '/api/admin/audit?limit=200', { token: platformAdmin.token });
    expect(platform.body.entries.filter((e: { target: string; action: string }) => e.target === org && e.action === 'org.payment.paid')).toHaveLength(1);

    const refund = await t.request('POST', `/api/admin/payments/${id}/refund`, { token: platformAdmin.token, body: { amount: 5, reason: 'asked by the customer' } });
    expect(refund.status).toBe(200);
    for (const address of ['owner@acme.example', 'admin@acme.example']) {
      const mail = await smtp.next((m) => m.to === address && m.subject === 'Refund for Acme Research: $5.00', `refund mail to ${address}`);
      expect(mail.text).toContain(id);
    }
    const refunded = (await orgAudit(t, owner, org)).find((e) => e.action === 'org.payment.refund');
    // No member acted: the entry is the system's (the operator's own entry is in the platform's log).
    expect(refunded).toMatchObject({ actor_email: null, target: org, details: { payment_id: id, kind: 'refund', source: 'admin', amount: 5, currency: 'USD', via: 'system' } });
    expect((await t.request('GET', `/api/billing/wallet?org_id=${org}`, { token: owner.token })).body.balance).toBe(20);
    // The mails went to the owner and the admin only (each mail of a kind is sent at once to every recipient).
    expect(smtp.mails.filter((m) => m.to === 'member@acme.example' && !m.text.includes('token='))).toEqual([]);
    await ledgerMatches(t, org);
  });

  test('the platform admin lists organizations with balances, reads one with its members and ledger, and adjusts its wallet', async () => {
    const { owner, admin, member, org } = await orgOf(t, 'Adjusted Org');
    const admin_ = { token: platformAdmin.token };
    const adjust = (body: Record<string, unknown>, target = org, headers: Record<string, string> = {}) =>
      t.request('POST', `/api/admin/orgs/${target}/adjustments`, { ...admin_, body, headers });

    const credited = await adjust({ amount: 12.5, reason: 'goodwill credit' }, org, { 'idempotency-key': 'goodwill-1' });
    expect(credited.status).toBe(201);
    expect(credited.body.transaction).toMatchObject({ type: 'adjustment', amount: 12.5, currency: 'USD', description: 'goodwill credit' });
    const replay = await adjust({ amount: 12.5, reason: 'goodwill credit' }, org, { 'idempotency-key': 'goodwill-1' });
    expect(replay.body.transaction.id).toBe(credited.body.transaction.id);
    expect((await adjust({ amount: 13, reason: 'goodwill credit' }, org, { 'idempotency-key': 'goodwill-1' })).status).toBe(409);
    const overdraw = await adjust({ amount: -20, reason: 'correction' });
    expect(overdraw.status).toBe(409);
    expect(overdraw.body).toEqual({ error: expect.stringContaining('allow_negative') });
    expect((await adjust({ amount: -2.5, reason: 'correction' })).status).toBe(201);
    expect((await t.request('GET', `/api/billing/wallet?org_id=${org}`, { token: owner.token })).body.balance).toBe(10);

    // The organization's owners and admins see each adjustment once, as the platform admin's act.
    const adjustments = (await orgAudit(t, admin, org)).filter((e) => e.action === 'wallet.adjust');
    expect(adjustments.map((e) => [e.actor_email, e.details.amount, e.details.reason])).toEqual([
      [platformAdmin.email, -2.5, 'correction'],
      [platformAdmin.email, 12.5, 'goodwill credit'],
    ]);

    // Not a live organization: 404, whatever the id looks like (a user's id included); bad bodies 400; others 403/401.
    for (const target of ['org_unknown', owner.id, 'x'.repeat(64)]) {
      const res = await adjust({ amount: 1, reason: 'x' }, target);
      expect({ target, status: res.status, body: res.body }).toEqual({ target, status: 404, body: { error: 'organization not found' } });
    }
    for (const body of [{ amount: 0, reason: 'x' }, { amount: 1.0000001, reason: 'x' }, { amount: 1, reason: '' }, { amount: '1', reason: 'x' }, { reason: 'x' }, { amount: 1e12, reason: 'x' }]) {
      const res = await adjust(body);
      expect({ body, status: res.status, error: typeof res.body.error }).toEqual({ body, status: 400, error: 'string' });
    }
    expect((await t.request('POST', `/api/admin/orgs/${org}/adjustments`, { token: owner.token, body: { amount: 1, reason: 'x' } })).status).toBe(403);
    expect((await t.request('POST', `/api/admin/orgs/${org}/adjustments`, { body: { amount: 1, reason: 'x' } })).status).toBe(401);

    const list = await t.request('GET', '/api/admin/orgs?q=adjusted', admin_);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ orgs: [{ id: org, name: 'Adjusted Org', currency: 'USD', balance: 10, member_count: 3, created_at: expect.any(String) }], next_cursor: null });
    const page = await t.request('GET', '/api/admin/orgs?limit=1', admin_);
    expect(page.body.orgs).toHaveLength(1);
    expect(page.body.next_cursor).toBeString();
    const next = await t.request('GET', `/api/admin/orgs?limit=1&cursor=${page.body.next_cursor}`, admin_);
    expect(next.body.orgs[0].id).not.toBe(page.body.orgs[0].id);
    expect((await t.request('GET', '/api/admin/orgs?cursor=nonsense', admin_)).status).toBe(400);
    expect((await t.request('GET', '/api/admin/orgs?q=%25', admin_)).body.orgs).toEqual([]);

    const detail = await t.request('GET', `/api/admin/orgs/${org}`, admin_);
    expect(detail.body).toMatchObject({ id: org, name: 'Adjusted Org', balance: 10, member_count: 3 });
    expect(detail.body.members.map((m: { email: string; role: string }) => [m.email, m.role])).toEqual([
      [owner.email, 'owner'],
      [admin.email, 'admin'],
      [member.email, 'member'],
    ]);
    const ledger = await t.request('GET', `/api/admin/orgs/${org}/transactions`, admin_);
    expect(ledger.body.transactions.map((x: { amount: number }) => x.amount)).toEqual([-2.5, 12.5]);
    for (const path of [`/api/admin/orgs/org_unknown`, `/api/admin/orgs/org_unknown/transactions`]) {
      expect(await t.request('GET', path, admin_)).toMatchObject({ status: 404, body: { error: 'organization not found' } });
    }
    expect((await t.request('GET', '/api/admin/orgs', { token: owner.token })).status).toBe(403);
    await ledgerMatches(t, org);
  });

  test('a dispute opened at the provider and then won: the money out and back are system entries of the organization', async () => {
    const { owner, org } = await orgOf(t, 'Disputed Org');
    const id = await topUp(t, owner, org, { provider: 'card', amount: 30, currency: 'USD' });
    const dispute = { paymentId: id, kind: 'dispute' as const, providerRefundId: `dp_${id}`, amountMicros: 30_000_000n, currency: 'USD' };
    await t.services.billing.refunds.applyReports('card', [{ ...dispute, status: 'open' }]);
    expect((await t.request('GET', `/api/billing/wallet?org_id=${org}`, { token: owner.token })).body.balance).toBe(0);
    await t.services.billing.refunds.applyReports('card', [{ ...dispute, status: 'won' }]);
    // A replayed notice moves nothing and records nothing more.
    await t.services.billing.refunds.applyReports('card', [{ ...dispute, status: 'won' }]);
    expect((await t.request('GET', `/api/billing/wallet?org_id=${org}`, { token: owner.token })).body.balance).toBe(30);
    const money = (await orgAudit(t, owner, org)).filter((e) => e.action.startsWith('org.payment.')).reverse();
    expect(money.map((e) => [e.action, e.actor_email, e.details.kind ?? null, e.details.amount])).toEqual([
      ['org.payment.paid', owner.email, null, 30],
      ['org.payment.refund', null, 'dispute', 30],
      ['org.payment.refund_reversed', null, 'dispute', 30],
    ]);
    expect(money[1]!.details).toMatchObject({ source: 'provider', via: 'system' });
    await ledgerMatches(t, org);
  });

  test('low balance: owners and admins set a threshold; each crossing below it is mailed to them once', async () => {
    const { owner, admin, member, org } = await orgOf(t, 'Thrifty Org', { owner: 'owner@thrifty.example', admin: 'admin@thrifty.example' });
    const settings = `/api/orgs/${org}/notifications`;
    expect((await t.request('GET', settings, { token: owner.token })).body).toEqual({ low_balance: null, currency: 'USD' });
    for (const low_balance of [-1, 0, 1.1234567, '5', 1e13]) {
      const res = await t.request('PUT', settings, { token: admin.token, body: { low_balance } });
      expect({ low_balance, status: res.status, error: typeof res.body.error }).toEqual({ low_balance, status: 400, error: 'string' });
    }
    expect((await t.request('PUT', settings, { token: member.token, body: { low_balance: 5 } })).status).toBe(403);
    expect((await t.request('GET', settings, { token: platformAdmin.token })).status).toBe(404);
    const set = await t.request('PUT', settings, { token: admin.token, body: { low_balance: 5 } });
    expect(set.body).toEqual({ low_balance: '5.000000', currency: 'USD' });
    expect((await orgAudit(t, owner, org)).find((e) => e.action === 'org.notifications.update')).toMatchObject({ actor_email: 'admin@thrifty.example', details: { low_balance: '5.000000' } });

    const adjust = (amount: number) =>
      t.request('POST', `/api/admin/orgs/${org}/adjustments`, { token: platformAdmin.token, body: { amount, reason: 'test', allow_negative: true } });
    const notified = async () => (await t.ctx.database.query<{ at: Date | null }>(sql`select low_balance_notified_at as at from organizations where id = ${org}`))[0]!.at;
    expect((await adjust(10)).status).toBe(201);
    expect((await adjust(-6)).status).toBe(201); // 4.00: below 5
    for (const address of ['owner@thrifty.example', 'admin@thrifty.example']) {
      const mail = await smtp.next((m) => m.to === address && m.subject === "Thrifty Org's balance is low: $4.00", `low balance mail to ${address}`);
      expect(mail.text).toContain('$5.00');
    }
    expect(await notified()).not.toBeNull();
    expect((await adjust(2)).status).toBe(201); // 6.00: back above, the crossing is over
    await waitFor(async () => (await notified()) === null, 'the crossing cleared');
    expect((await adjust(-3)).status).toBe(201); // 3.00: a new crossing, a new mail
    await smtp.next((m) => m.to === 'owner@thrifty.example' && m.subject === "Thrifty Org's balance is low: $3.00", 'the second low balance mail');
    expect((await t.request('PUT', settings, { token: owner.token, body: { low_balance: null } })).body).toEqual({ low_balance: null, currency: 'USD' });
    expect(smtp.mails.filter((m) => m.to === member.email && m.subject.includes('balance is low'))).toEqual([]);
    await ledgerMatches(t, org);
  });

  test('a deleted organization is not adjusted (404)', async () => {
    const { owner, org } = await orgOf(t, 'Gone');
    expect((await t.request('DELETE', `/api/orgs/${org}`, { token: owner.token })).status).toBe(204);
    const res = await t.request('POST', `/api/admin/orgs/${org}/adjustments`, { token: platformAdmin.token, body: { amount: 1, reason: 'late credit' } });
    expect(res).toMatchObject({ status: 404, body: { error: 'organization not found' } });
    expect((await t.request('GET', `/api/admin/orgs/${org}`, { token: platformAdmin.token })).status).toBe(404);
  });

  test('a personal top-up is not written to any organization’s log, and is mailed to its account as before', async () => {
    const u = await makeUser(t, { email: 'solo@acme.example' });
    const created = await t.request('POST', '/api/billing/payments', { token: u.token, body: { provider: 'card', amount: 10, currency: 'USD' } });
    await t.request('POST', `/api/payments/sandbox/${created.body.id}/pay`);
    await smtp.next((m) => m.to === 'solo@acme.example' && m.subject === 'Payment received: $10.00', 'personal payment mail');
    const [row] = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from audit_log where details->>'payment_id' = ${created.body.id}`);
    expect(row!.n).toBe(0);
  });
});

describe('an organization’s invoice, China site (postgres)', () => {
  let t: TestApp;
  beforeAll(async () => {
    smtpOf = null;
    t = await createTestApp('postgres', { SITE: 'cn' });
  });
  afterAll(() => t.close());

  test('an invoice issued for the organization’s payment is an audit entry naming the member who asked for it', async () => {
    const { owner, admin, org } = await orgOf(t, '某某科技');
    const id = await topUp(t, owner, org, { provider: 'app_wallet', amount: 66.6, currency: 'CNY' });
    const invoice = await t.request('POST', '/api/billing/invoices', { token: admin.token, body: { payment_id: id, title: '北京某某科技有限公司', tax_id: '91110000600037341L', org_id: org } });
    expect(invoice.status).toBe(201);
    const entries = await orgAudit(t, owner, org);
    expect(entries.find((e) => e.action === 'org.invoice.issue')).toMatchObject({
      actor_email: admin.email,
      details: { invoice_id: invoice.body.id, payment_id: id, amount: 66.6, currency: 'CNY', title: '北京某某科技有限公司', tax_id: '91110000600037341L' },
    });
    expect(entries.find((e) => e.action === 'org.payment.paid')).toMatchObject({ actor_email: owner.email, details: { amount: 66.6, currency: 'CNY' } });
    // A second request is 409 and records nothing more.
    expect((await t.request('POST', '/api/billing/invoices', { token: admin.token, body: { payment_id: id, title: 'x', org_id: org } })).status).toBe(409);
    expect((await orgAudit(t, owner, org)).filter((e) => e.action === 'org.invoice.issue')).toHaveLength(1);
  });
});

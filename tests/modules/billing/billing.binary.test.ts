/**
 * Billing through the compiled binary (dist/cpd): the sandbox checkout (QR SVG, Pay button) with
 * an invoice on the China site, and Stripe Checkout and Refunds in live mode against the local
 * Stripe, so the qrcode and stripe packages are known to work inside `bun build --compile`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createAccountsService } from '../../../src/modules/accounts';
import { startBinary } from '../../support/binary';
import { createTestContext, type TestContext } from '../../support/app';
import { startFakeStripe } from './fakes/stripe';

describe('billing in the compiled binary (postgres)', () => {
  // One database per site: a database belongs to the site that first migrated it.
  const databases: Record<'cn' | 'intl', TestContext> = {} as never;
  let token: string;
  beforeAll(async () => {
    for (const site of ['cn', 'intl'] as const) databases[site] = await createTestContext('postgres', { SITE: site });
  }, 120_000);
  afterAll(() => Promise.all(Object.values(databases).map((tc) => tc.close())));

  /** A signed-in user on that site's database; `call` uses it. */
  async function signIn(site: 'cn' | 'intl') {
    const accounts = createAccountsService(databases[site].ctx);
    const user = await accounts.createUser({ email: 'binary@example.com', password: 'long enough password' });
    token = (await accounts.createSession(user.id)).token;
    return databases[site].testDb.url!;
  }

  const call = (base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      redirect: 'manual',
    });

  test('China site, sandbox: QR checkout, Pay, credited wallet, invoice download', async () => {
    const cpd = await startBinary({ env: { DATABASE_URL: await signIn('cn'), SITE: 'cn', SECRET_KEY: 'binary-test-secret-0123456789abcdef0123' } });
    try {
      const created = await call(cpd.url, 'POST', '/api/billing/payments', { provider: 'app_wallet', amount: 18.8, currency: 'CNY' });
      expect(created.status).toBe(201);
      const p = (await created.json()) as { id: string; qr_code_url: string };
      const qr = await fetch(`${cpd.url}${new URL(p.qr_code_url).pathname}`);
      expect(qr.headers.get('content-type')).toBe('image/svg+xml');
      expect(await qr.text()).toStartWith('<svg');
      expect((await call(cpd.url, 'POST', `/api/payments/sandbox/${p.id}/pay`)).status).toBe(303);
      expect(await (await call(cpd.url, 'GET', `/api/billing/payments/${p.id}`)).json()).toMatchObject({ status: 'paid' });
      expect(await (await call(cpd.url, 'GET', '/api/billing/wallet')).json()).toMatchObject({ balance: 18.8, currency: 'CNY' });
      expect((await call(cpd.url, 'POST', '/api/billing/invoices', { payment_id: p.id, title: '上海某某有限公司' })).status).toBe(201);
      const doc = await fetch(`${cpd.url}/api/billing/invoices/${p.id}/download?token=${token}`);
      expect(doc.headers.get('content-disposition')).toStartWith('attachment;');
      expect(await doc.text()).toContain('上海某某有限公司');
    } finally {
      expect(await cpd.stop()).toBe(0);
    }
  }, 120_000);

  test('international site, live: Stripe Checkout session, signed webhook, credited wallet; no sandbox routes; an admin refund and a dashboard refund debited once each', async () => {
    const stripe = startFakeStripe({ secretKey: 'sk_test_binary', webhookSecret: 'whsec_binary' });
    const cpd = await startBinary({
      env: {
        DATABASE_URL: await signIn('intl'),
        SITE: 'intl',
        PAYMENT_MODE: 'live',
        STRIPE_SECRET_KEY: 'sk_test_binary',
        STRIPE_WEBHOOK_SECRET: 'whsec_binary',
        STRIPE_API_URL: stripe.url,
        SECRET_KEY: 'binary-test-secret-0123456789abcdef0123',
      },
    });
    try {
      const created = await call(cpd.url, 'POST', '/api/billing/payments', { provider: 'card', amount: 9.99, currency: 'USD' });
      expect(created.status).toBe(201);
      const p = (await created.json()) as { id: string; redirect_url: string };
      expect(p.redirect_url).toBe(stripe.sessionFor(p.id).url);
      expect((await call(cpd.url, 'GET', `/api/payments/sandbox/${p.id}`)).status).toBe(404);
      const event = await stripe.pay(p.id);
      expect((await call(cpd.url, 'POST', '/api/payments/webhooks/card', event.body, event.headers)).status).toBe(200);
      expect(await (await call(cpd.url, 'GET', `/api/billing/payments/${p.id}`)).json()).toMatchObject({ status: 'paid' });
      const receipt = await fetch(`${cpd.url}/api/billing/receipts/${p.id}/download?token=${token}`);
      expect(receipt.status).toBe(200);
      expect(await receipt.text()).toContain('9.99 USD');

      // An operator refunds 2.50 through Stripe's Refunds API (twice, one Idempotency-Key) ...
      const accounts = createAccountsService(databases.intl.ctx);
      const operator = await accounts.createUser({ email: 'operator@example.com', password: 'long enough password', isAdmin: true });
      const adminToken = (await accounts.createSession(operator.id)).token;
      const refund = () =>
        fetch(`${cpd.url}/api/admin/payments/${p.id}/refund`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json', 'idempotency-key': 'binary-refund' },
          body: JSON.stringify({ amount: 2.5, reason: 'binary test' }),
        });
      const [first, again] = [await refund(), await refund()];
      expect([first.status, again.status]).toEqual([200, 200]);
      const answer = (await first.json()) as { payment: { refunded_amount: number; refunds: Array<{ provider_refund_id: string; status: string }> } };
      expect(answer.payment.refunded_amount).toBe(2.5);
      expect(answer.payment.refunds).toEqual([expect.objectContaining({ status: 'succeeded', provider_refund_id: expect.stringMatching(/^re_/) })]);
      expect([...stripe.refunds.values()].map((r) => r.amount)).toEqual([250]);
      // ... and 1.00 is refunded at the dashboard: its signed charge.refunded, delivered twice, debits it once.
      stripe.refundAtDashboard(p.id, 100);
      const notice = await stripe.chargeRefunded(p.id);
      for (let i = 0; i < 2; i++) expect((await call(cpd.url, 'POST', '/api/payments/webhooks/card', notice.body, notice.headers)).status).toBe(200);
      expect(await (await call(cpd.url, 'GET', '/api/billing/wallet')).json()).toMatchObject({ balance: 6.49 });
      expect(await (await call(cpd.url, 'GET', `/api/billing/payments/${p.id}`)).json()).toMatchObject({ status: 'paid', refunded_amount: 3.5 });
      const refunded = await (await fetch(`${cpd.url}/api/billing/receipts/${p.id}/download?token=${token}`)).text();
      expect(refunded.match(/Refunded [^<]*<\/th><td>[\d.]+ USD/g)?.length).toBe(2);
      expect(refunded).toContain('Net amount</th><td>6.49 USD');
    } finally {
      expect(await cpd.stop()).toBe(0);
      stripe.stop();
    }
  }, 120_000);
});

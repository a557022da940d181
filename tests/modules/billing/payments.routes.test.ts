import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { signSandboxNotification } from '../../../src/modules/billing/providers/sandbox';
import { createTestApp, TEST_SECRET, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { ledgerSumMicros } from './support';
import { manualClock } from '../../support/clock';

type User = Awaited<ReturnType<typeof makeUser>>;

for (const kind of DB_KINDS) {
  describe(`payments, sandbox, international site (${kind})`, () => {
    const clock = manualClock();
    let t: TestApp;
    let alice: User;
    let bob: User;
    beforeAll(async () => {
      t = await createTestApp(kind, { SITE: 'intl', TOPUP_MIN: '5', TOPUP_MAX: '500' }, { clock });
      alice = await makeUser(t);
      bob = await makeUser(t);
    });
    afterAll(() => t.close());

    const createPayment = (user: User, body: unknown, headers: Record<string, string> = {}) =>
      t.request('POST', '/api/billing/payments', { token: user.token, body, headers });
    const balance = async (user: User) => (await t.request('GET', '/api/billing/wallet', { token: user.token })).body.balance;
    /** Posts a notification to the webhook exactly as the sandbox provider signs it. */
    const notify = (provider: string, notice: Parameters<typeof signSandboxNotification>[1], secret = TEST_SECRET) => {
      const { body, headers } = signSandboxNotification(secret, notice);
      return t.request('POST', `/api/payments/webhooks/${provider}`, { body, headers: Object.fromEntries(headers) });
    };

    test('create validates in order: fields, provider, currency, bounds, decimals, enabled', async () => {
      const cases: Array<[unknown, number]> = [
        [{ amount: 10, currency: 'USD' }, 400], // missing provider
        [{ provider: 'card', amount: '10', currency: 'USD' }, 400], // amount not a number
        [{ provider: 'paypal', amount: 10, currency: 'EUR' }, 400], // unknown provider
        [{ provider: 'app_wallet', amount: 10, currency: 'CNY' }, 400], // currency checked before enabled
        [{ provider: 'app_wallet', amount: 501, currency: 'USD' }, 400], // bounds before enabled
        [{ provider: 'app_wallet', amount: 4.99, currency: 'USD' }, 400],
        [{ provider: 'app_wallet', amount: 10.001, currency: 'USD' }, 400], // decimals before enabled
        [{ provider: 'card', amount: 0, currency: 'USD' }, 400],
        [{ provider: 'card', amount: -10, currency: 'USD' }, 400],
        [{ provider: 'app_wallet', amount: 10, currency: 'USD' }, 409], // known but not enabled on intl
      ];
      for (const [body, status] of cases) {
        const res = await createPayment(alice, body);
        expect({ body, status: res.status }).toEqual({ body, status });
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      expect((await t.request('POST', '/api/billing/payments', { body: { provider: 'card', amount: 10, currency: 'USD' } })).status).toBe(401);
    });

    test('a card payment answers a redirect to the checkout and expires 30 minutes later', async () => {
      const res = await createPayment(alice, { provider: 'card', amount: 19.99, currency: 'USD' });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ provider: 'card', amount: 19.99, currency: 'USD', status: 'pending' });
      expect(res.body.redirect_url).toBe(`http://localhost:8080/api/payments/sandbox/${res.body.id}`);
      expect(res.body).not.toHaveProperty('qr_code_url');
      expect(Date.parse(res.body.expires_at) - clock.now().getTime()).toBe(30 * 60_000);
    });

    test('Idempotency-Key: the same key and body answer the same payment; another body is 409', async () => {
      const body = { provider: 'card', amount: 7, currency: 'USD' };
      const [a, b] = await Promise.all([createPayment(alice, body, { 'idempotency-key': 'k1' }), createPayment(alice, body, { 'idempotency-key': 'k1' })]);
      expect(a.body.id).toBe(b.body.id);
      expect(a.body).toEqual(b.body); // the twin waited for the provider order: both carry redirect_url
      expect(b.body.redirect_url).toEqual(expect.any(String));
      const again = await createPayment(alice, body, { 'idempotency-key': 'k1' });
      expect(again.status).toBe(201);
      expect(again.body.id).toBe(a.body.id);
      expect((await createPayment(alice, { ...body, amount: 8 }, { 'idempotency-key': 'k1' })).status).toBe(409);
      // Keys are per account.
      expect((await createPayment(bob, body, { 'idempotency-key': 'k1' })).body.id).not.toBe(a.body.id);
    });

    test('Pay on the sandbox checkout credits the wallet once; replays change nothing', async () => {
      const before = await balance(alice);
      const { body: p } = await createPayment(alice, { provider: 'card', amount: 12.34, currency: 'USD' });
      const page = await t.request('GET', `/api/payments/sandbox/${p.id}`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toContain('text/html');
      expect(page.text).toContain(`action="/api/payments/sandbox/${p.id}/pay"`);
      expect(page.text).toContain(`action="/api/payments/sandbox/${p.id}/fail"`);

      const pay = await t.request('POST', `/api/payments/sandbox/${p.id}/pay`);
      expect(pay.status).toBe(303);
      const got = await t.request('GET', `/api/billing/payments/${p.id}`, { token: alice.token });
      expect(got.body).toMatchObject({ id: p.id, status: 'paid', amount: 12.34, provider_reference: expect.stringMatching(/^sbx_/) });
      expect(got.body.paid_at).not.toBeNull();
      expect(await balance(alice)).toBeCloseTo(before + 12.34, 6);

      // The same button again, and a duplicated notification: still one credit.
      await t.request('POST', `/api/payments/sandbox/${p.id}/pay`);
      const dup = await notify('card', { payment_id: p.id, status: 'paid', amount: '12.34', currency: 'USD' });
      expect(dup.status).toBe(200);
      // A failure reported after payment does not undo it (paid is final).
      expect((await notify('card', { payment_id: p.id, status: 'failed', amount: '12.34', currency: 'USD' })).status).toBe(200);
      expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: alice.token })).body.status).toBe('paid');
      expect(await balance(alice)).toBeCloseTo(before + 12.34, 6);
      expect(await ledgerSumMicros(t.ctx, alice.id)).toBe(BigInt(Math.round((before + 12.34) * 1e6)));
    });

    test('the webhook verifies the exact raw bytes', async () => {
      const { body: p } = await createPayment(alice, { provider: 'card', amount: 5, currency: 'USD' });
      const raw = `{ "payment_id": "${p.id}",  "status": "paid", "amount": "5.00", "currency": "USD", "transaction_id": "sbx_raw" }`;
      const at = Math.floor(Date.now() / 1000);
      const { hmacHex } = await import('../../../src/platform/crypto');
      const res = await t.request('POST', '/api/payments/webhooks/card', {
        body: raw,
        headers: { 'x-sandbox-signature': `t=${at},v1=${hmacHex(TEST_SECRET, `${at}.${raw}`)}` },
      });
      expect(res.status).toBe(200);
      expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: alice.token })).body.status).toBe('paid');
    });

    test('a bad signature is 400 and changes nothing; an unknown payment changes nothing', async () => {
      const { body: p } = await createPayment(bob, { provider: 'card', amount: 50, currency: 'USD' });
      const forged = await notify('card', { payment_id: p.id, status: 'paid', amount: '50.00', currency: 'USD' }, 'not-the-secret-0123456789abcdef0123');
      expect(forged.status).toBe(400);
      expect(forged.body).toEqual({ error: expect.any(String) });
      const unsigned = await t.request('POST', '/api/payments/webhooks/card', { body: { payment_id: p.id, status: 'paid' } });
      expect(unsigned.status).toBe(400);
      const unknown = await notify('card', { payment_id: 'pay_doesnotexist', status: 'paid', amount: '50.00', currency: 'USD' });
      expect(unknown.status).toBe(404);
      expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: bob.token })).body.status).toBe('pending');
      expect(await balance(bob)).toBe(0);
      expect((await t.request('POST', '/api/payments/webhooks/nope', { body: '{}' })).status).toBe(404);
    });

    test('a paid amount that does not match the order is recorded, not credited', async () => {
      const { body: p } = await createPayment(bob, { provider: 'card', amount: 50, currency: 'USD' });
      expect((await notify('card', { payment_id: p.id, status: 'paid', amount: '5.00', currency: 'USD' })).status).toBe(200);
      expect((await notify('card', { payment_id: p.id, status: 'paid', amount: '50.00', currency: 'CNY' })).status).toBe(200);
      expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: bob.token })).body.status).toBe('pending');
      expect(await balance(bob)).toBe(0);
    });

    test('reordered: failed then paid is still credited (money received is never lost)', async () => {
      const { body: p } = await createPayment(bob, { provider: 'card', amount: 20, currency: 'USD' });
      expect((await t.request('POST', `/api/payments/sandbox/${p.id}/fail`)).status).toBe(303);
      expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: bob.token })).body.status).toBe('failed');
      await notify('card', { payment_id: p.id, status: 'paid', amount: '20.00', currency: 'USD' });
      expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: bob.token })).body.status).toBe('paid');
      expect(await balance(bob)).toBe(20);
    });

    test('a pending payment expires at expires_at on read; a late paid notification is still credited', async () => {
      const { body: p } = await createPayment(bob, { provider: 'card', amount: 30, currency: 'USD' });
      clock.advance(30 * 60_000);
      expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: bob.token })).body.status).toBe('expired');
      const before = await balance(bob);
      await notify('card', { payment_id: p.id, status: 'paid', amount: '30.00', currency: 'USD' });
      expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: bob.token })).body.status).toBe('paid');
      expect(await balance(bob)).toBe(before + 30);
    });

    test("another account's payment is 404", async () => {
      const { body: p } = await createPayment(alice, { provider: 'card', amount: 5, currency: 'USD' });
      const res = await t.request('GET', `/api/billing/payments/${p.id}`, { token: bob.token });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: expect.any(String) });
    });

    test('list: newest first, status filter, cursor pages, bad cursor and limit are 400', async () => {
      const carol = await makeUser(t);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        clock.advance(1);
        ids.push((await createPayment(carol, { provider: 'card', amount: 5 + i, currency: 'USD' })).body.id);
      }
      await t.request('POST', `/api/payments/sandbox/${ids[1]}/pay`);
      const first = await t.request('GET', '/api/billing/payments?limit=2', { token: carol.token });
      expect(first.body.payments.map((p: { id: string }) => p.id)).toEqual([ids[4], ids[3]]);
      expect(first.body.payments[0]).toEqual({
        id: ids[4],
        provider: 'card',
        amount: 9,
        currency: 'USD',
        status: 'pending',
        created_at: expect.any(String),
        paid_at: null,
        refunded_amount: 0,
      });
      const second = await t.request('GET', `/api/billing/payments?limit=2&cursor=${first.body.next_cursor}`, { token: carol.token });
      expect(second.body.payments.map((p: { id: string }) => p.id)).toEqual([ids[2], ids[1]]);
      const third = await t.request('GET', `/api/billing/payments?limit=2&cursor=${second.body.next_cursor}`, { token: carol.token });
      expect(third.body).toEqual({ payments: [expect.objectContaining({ id: ids[0] })], next_cursor: null });
      const paid = await t.request('GET', '/api/billing/payments?status=paid', { token: carol.token });
      expect(paid.body.payments.map((p: { id: string }) => p.id)).toEqual([ids[1]]);
      for (const q of ['limit=0', 'limit=201', 'status=done', 'cursor=not-a-cursor', 'cursor=bm9wZQ']) {
        expect((await t.request('GET', `/api/billing/payments?${q}`, { token: carol.token })).status).toBe(400);
      }
    });

    test('providers lists the enabled ones with site currency and mode', async () => {
      const res = await t.request('GET', '/api/payments/providers');
      expect(res.body).toEqual({ providers: [{ id: 'card', name: 'Card', currency: 'USD', mode: 'sandbox' }] });
    });

    test('receipts: HTML attachment for a paid card payment, session or query token; invoices are 404 here', async () => {
      const { body: p } = await createPayment(alice, { provider: 'card', amount: 15, currency: 'USD' });
      expect((await t.request('GET', `/api/billing/receipts/${p.id}/download`, { token: alice.token })).status).toBe(404); // not paid yet
      await t.request('POST', `/api/payments/sandbox/${p.id}/pay`);
      const viaQuery = await t.request('GET', `/api/billing/receipts/${p.id}/download?token=${alice.token}`);
      expect(viaQuery.status).toBe(200);
      expect(viaQuery.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(viaQuery.headers.get('content-disposition')).toContain('attachment');
      expect(viaQuery.text).toContain('15.00 USD');
      expect(viaQuery.text).toContain(alice.email);
      expect((await t.request('GET', `/api/billing/receipts/${p.id}/download`, { token: bob.token })).status).toBe(404);
      expect((await t.request('GET', `/api/billing/receipts/${p.id}/download`)).status).toBe(401);
      expect((await t.request('GET', '/api/billing/invoices', { token: alice.token })).status).toBe(404);
      expect((await t.request('POST', '/api/billing/invoices', { token: alice.token, body: { payment_id: p.id, title: 'x' } })).status).toBe(404);
      expect((await t.request('POST', '/api/billing/invoices', { token: alice.token, body: {} })).status).toBe(404); // no route here, not a 400
      expect((await t.request('GET', `/api/billing/invoices/${p.id}/download?token=${alice.token}`)).status).toBe(404);
    });

    test('summary totals top-ups and usage', async () => {
      const dave = await makeUser(t);
      const { body: p } = await createPayment(dave, { provider: 'card', amount: 100, currency: 'USD' });
      await t.request('POST', `/api/payments/sandbox/${p.id}/pay`);
      await t.services.billing.debitUsage(t.ctx.database.db, { userId: dave.id, amountMicros: 1_234_567n, reference: 'sum-1', description: 'usage' });
      const res = await t.request('GET', '/api/billing/summary', { token: dave.token });
      expect(res.body).toEqual({ balance: 98.765433, currency: 'USD', total_topups: 100, total_usage: 1.234567, month_usage: 1.234567 });
    });
  });
}

describe('payments, sandbox, China site (postgres)', () => {
  let t: TestApp;
  let user: User;
  beforeAll(async () => {
    t = await createTestApp('postgres', { SITE: 'cn' });
    user = await makeUser(t);
  });
  afterAll(() => t.close());

  const payWallet = async (provider: string, amount: number) => {
    const { body: p } = await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider, amount, currency: 'CNY' } });
    await t.request('POST', `/api/payments/sandbox/${p.id}/pay`);
    return p;
  };

  test('wallet providers answer a QR (SVG) whose target is the checkout page', async () => {
    const res = await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider: 'chat_wallet', amount: 88, currency: 'CNY' } });
    expect(res.status).toBe(201);
    expect(res.body).not.toHaveProperty('redirect_url');
    expect(res.body.qr_code_url).toBe(`http://localhost:8080/api/payments/sandbox/${res.body.id}/qr.svg`);
    const qr = await t.request('GET', `/api/payments/sandbox/${res.body.id}/qr.svg`);
    expect(qr.headers.get('content-type')).toBe('image/svg+xml');
    expect(qr.text).toContain('<svg');
    expect((await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider: 'card', amount: 8, currency: 'CNY' } })).status).toBe(409);
    expect((await t.request('GET', '/api/payments/providers')).body.providers.map((p: { id: string }) => p.id)).toEqual(['chat_wallet', 'app_wallet']);
  });

  test('invoices: create, Chinese title renders, repeat is 409 with the record, unpaid is 404, bad tax id 400', async () => {
    const p = await payWallet('app_wallet', 66.6);
    const unpaid = (await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider: 'app_wallet', amount: 10, currency: 'CNY' } })).body;
    expect((await t.request('POST', '/api/billing/invoices', { token: user.token, body: { payment_id: p.id } })).status).toBe(400);
    expect((await t.request('POST', '/api/billing/invoices', { token: user.token, body: { payment_id: p.id, title: '某某公司', tax_id: '123' } })).status).toBe(400);
    expect((await t.request('POST', '/api/billing/invoices', { token: user.token, body: { payment_id: unpaid.id, title: '某某公司' } })).status).toBe(404);
    expect((await t.request('POST', '/api/billing/invoices', { token: user.token, body: { payment_id: 'pay_missing', title: '某某公司' } })).status).toBe(404);

    const created = await t.request('POST', '/api/billing/invoices', {
      token: user.token,
      body: { payment_id: p.id, title: '北京某某科技有限公司', tax_id: '91110108MA01ABCD2X' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^inv_/),
      payment_id: p.id,
      title: '北京某某科技有限公司',
      tax_id: '91110108MA01ABCD2X',
      amount: 66.6,
      currency: 'CNY',
      status: 'issued',
      created_at: expect.any(String),
    });
    const repeat = await t.request('POST', '/api/billing/invoices', { token: user.token, body: { payment_id: p.id, title: '另一个' } });
    expect(repeat.status).toBe(409);
    expect(repeat.body).toEqual(created.body);
    expect((await t.request('GET', '/api/billing/invoices', { token: user.token })).body).toEqual({ invoices: [created.body] });

    const res = await fetchDownload(`/api/billing/invoices/${p.id}/download?token=${user.token}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="invoice-inv_/);
    const text = new TextDecoder('utf-8', { fatal: true }).decode(res.bytes);
    expect(text).toContain('<meta charset="utf-8">');
    expect(text).toContain('北京某某科技有限公司');
    expect(text).toContain('66.60 CNY');
    expect((await t.request('GET', `/api/billing/invoices/${unpaid.id}/download`, { token: user.token })).status).toBe(404);
    expect((await t.request('GET', `/api/billing/receipts/${p.id}/download`, { token: user.token })).status).toBe(404);
  });

  async function fetchDownload(path: string) {
    const res = await t.app.handle(new Request(`http://localhost${path}`));
    return { status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) };
  }
});

describe('payments, live mode without the sandbox (postgres)', () => {
  test('the sandbox checkout routes do not exist in live mode', async () => {
    const t = await createTestApp('postgres', {
      PAYMENT_MODE: 'live',
      STRIPE_SECRET_KEY: 'sk_test_x',
      STRIPE_WEBHOOK_SECRET: 'whsec_x',
    });
    try {
      for (const path of ['/api/payments/sandbox/pay_x', '/api/payments/sandbox/pay_x/qr.svg']) expect((await t.request('GET', path)).status).toBe(404);
      expect((await t.request('POST', '/api/payments/sandbox/pay_x/pay')).status).toBe(404);
      expect((await t.request('GET', '/api/payments/providers')).body.providers).toEqual([{ id: 'card', name: 'Card', currency: 'USD', mode: 'live' }]);
    } finally {
      await t.close();
    }
  });
});

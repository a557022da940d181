/**
 * POST /api/admin/payments/{id}/refund in sandbox mode (the refund settles at once): the answer's
 * shape, the wallet's `adjustment`, what remains unrefunded, validation, Idempotency-Key, the
 * balance below zero only when allowed, the audit entry, the user's views, the receipt and the
 * payments counter.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { parseMetrics } from '../../support/prometheus';
import { ledgerSumMicros } from '../billing/support';
import { auditEntries } from './support';

type User = Awaited<ReturnType<typeof makeUser>>;

for (const kind of DB_KINDS) {
  describe(`admin refunds, sandbox, international site (${kind})`, () => {
    let t: TestApp;
    let admin: User;
    let user: User;
    beforeAll(async () => {
      t = await createTestApp(kind, { SITE: 'intl' });
      admin = await makeUser(t, { admin: true, email: 'refund-admin@ops.example' });
      user = await makeUser(t);
    });
    afterAll(() => t.close());

    /** A card top-up of `amount` paid through the sandbox checkout; answers its id. */
    async function paid(who: User, amount: number): Promise<string> {
      const res = await t.request('POST', '/api/billing/payments', { token: who.token, body: { provider: 'card', amount, currency: 'USD' } });
      expect(res.status).toBe(201);
      await t.services.billing.sandbox!.decide(res.body.id, 'paid');
      return res.body.id;
    }
    const refund = (id: string, body: unknown, key?: string, token = admin.token) =>
      t.request('POST', `/api/admin/payments/${id}/refund`, { token, body, headers: key ? { 'idempotency-key': key } : {} });
    const balance = (who: User = user) => t.services.billing.getBalanceMicros(who.id);
    const transactions = async (who: User = user) => (await t.request('GET', '/api/billing/transactions', { token: who.token })).body.transactions;
    const counted = async (status: string) =>
      parseMetrics((await t.ctx.metrics.scrape()).text).value('cpd_payments_total', { provider: 'card', status });

    test('a partial refund answers {payment} with refunded_amount (still paid) and debits one `adjustment` "Refund of payment <id>"', async () => {
      const id = await paid(user, 20);
      const refundedBefore = await counted('refunded');
      const res = await refund(id, { amount: 7.5, reason: 'customer asked' }, 'r-1');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        payment: {
          id,
          user_id: user.id,
          email: user.email,
          provider: 'card',
          amount: 20,
          currency: 'USD',
          status: 'paid',
          created_at: expect.any(String),
          paid_at: expect.any(String),
          provider_ref: expect.stringMatching(/^sbx_/),
          failure: null,
          refunded_amount: 7.5,
          refunds: [
            {
              id: expect.stringMatching(/^rfd_/),
              kind: 'refund',
              source: 'admin',
              amount: 7.5,
              status: 'succeeded',
              reason: 'customer asked',
              provider_refund_id: expect.any(String),
              created_at: expect.any(String),
            },
          ],
        },
      });
      expect(await balance()).toBe(12_500_000n);
      const [latest] = await transactions();
      expect(latest).toMatchObject({ type: 'adjustment', amount: -7.5, currency: 'USD', description: `Refund of payment ${id}` });
      expect(await ledgerSumMicros(t.ctx, user.id)).toBe(await balance());
      expect(await counted('refunded')).toBe(refundedBefore + 1);

      // The rest, by default: what remains unrefunded.
      const rest = await refund(id, { reason: 'the rest' });
      expect(rest.status).toBe(200);
      expect(rest.body.payment).toMatchObject({ status: 'paid', refunded_amount: 20 });
      expect(rest.body.payment.refunds.map((r: { amount: number }) => r.amount)).toEqual([7.5, 12.5]);
      expect(await balance()).toBe(0n);
      const nothingLeft = await refund(id, { reason: 'again' });
      expect(nothingLeft.status).toBe(409);
      expect(nothingLeft.body.error).toContain('nothing remains');
      expect(await balance()).toBe(0n);
    });

    test('the user sees refunded_amount on the payment, in the list and on the receipt', async () => {
      const buyer = await makeUser(t);
      const id = await paid(buyer, 30);
      expect((await refund(id, { amount: 10.25, reason: 'partial' })).status).toBe(200);
      const one = await t.request('GET', `/api/billing/payments/${id}`, { token: buyer.token });
      expect(one.body).toMatchObject({ id, status: 'paid', amount: 30, refunded_amount: 10.25 });
      const list = await t.request('GET', '/api/billing/payments', { token: buyer.token });
      expect(list.body.payments[0]).toMatchObject({ id, status: 'paid', refunded_amount: 10.25 });
      const admins = await t.request('GET', `/api/admin/payments?user_id=${buyer.id}`, { token: admin.token });
      expect(admins.body.payments[0]).toMatchObject({ id, refunded_amount: 10.25, refunds: [expect.objectContaining({ amount: 10.25 })] });
      const receipt = await t.request('GET', `/api/billing/receipts/${id}/download`, { token: buyer.token });
      expect(receipt.status).toBe(200);
      expect(receipt.text).toContain('Amount paid</th><td>30.00 USD');
      expect(receipt.text).toMatch(/Refunded [^<]*<\/th><td>10\.25 USD/);
      expect(receipt.text).toContain('Net amount</th><td>19.75 USD');
      // An unrefunded payment's receipt has no refund rows.
      const whole = await paid(buyer, 5);
      expect((await t.request('GET', `/api/billing/receipts/${whole}/download`, { token: buyer.token })).text).not.toContain('Refunded');
    });

    test('amounts and reasons are validated (400), an unpaid or unknown payment is refused, nothing changes', async () => {
      const buyer = await makeUser(t);
      const id = await paid(buyer, 10);
      const before = await balance(buyer);
      const audited = (await auditEntries(t, admin.token)).length;
      const bad: unknown[] = [
        { amount: 0, reason: 'zero' },
        { amount: -1, reason: 'negative' },
        { amount: 1.0000001, reason: 'seven decimals' },
        { amount: 10.01, reason: 'more than was paid' },
        { amount: '5', reason: 'string amount' },
        { amount: 5 },
        { amount: 5, reason: '' },
        { amount: 5, reason: '   ' },
        { amount: 5, reason: 'x'.repeat(501) },
        { amount: 5, reason: 'ok', allow_negative: 'yes' },
      ];
      for (const body of bad) {
        const res = await refund(id, body);
        expect({ body, status: res.status }).toEqual({ body, status: 400 });
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      expect((await refund(id, { amount: 10.01, reason: 'too much' })).body.error).toContain('at most 10');

      const pending = await t.request('POST', '/api/billing/payments', { token: buyer.token, body: { provider: 'card', amount: 8, currency: 'USD' } });
      const unpaid = await refund(pending.body.id, { reason: 'not paid' });
      expect(unpaid.status).toBe(409);
      expect(unpaid.body.error).toContain('paid');
      expect((await refund('pay_unknown', { reason: 'nobody' })).status).toBe(404);
      expect((await refund(id, { reason: 'not an admin' }, undefined, buyer.token)).status).toBe(403);
      expect((await t.request('POST', `/api/admin/payments/${id}/refund`, { body: { reason: 'anonymous' } })).status).toBe(401);

      expect(await balance(buyer)).toBe(before);
      expect((await auditEntries(t, admin.token)).length).toBe(audited);
      expect((await t.request('GET', `/api/billing/payments/${id}`, { token: buyer.token })).body.refunded_amount).toBe(0);
    });

    test('Idempotency-Key: the same key and body refund once, even sent at once; another body is 409', async () => {
      const buyer = await makeUser(t);
      const id = await paid(buyer, 10);
      const body = { amount: 4, reason: 'duplicate charge' };
      const answers = await Promise.all([refund(id, body, 'same'), refund(id, body, 'same'), refund(id, body, 'same')]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
      expect(answers.map((a) => a.body.payment.refunded_amount)).toEqual([4, 4, 4]);
      expect(await balance(buyer)).toBe(6_000_000n);
      for (const other of [{ amount: 5, reason: 'duplicate charge' }, { amount: 4, reason: 'another reason' }, { reason: 'duplicate charge' }]) {
        const res = await refund(id, other, 'same');
        expect(res.status).toBe(409);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      // The key belongs to that refund: the rest by default under it is the first refund again.
      expect((await refund(id, body, 'same')).body.payment.refunds).toHaveLength(1);
      expect(await balance(buyer)).toBe(6_000_000n);
      expect(await ledgerSumMicros(t.ctx, buyer.id)).toBe(6_000_000n);
    });

    test('a refund of money already spent needs allow_negative: true', async () => {
      const spender = await makeUser(t);
      const id = await paid(spender, 10);
      await t.services.billing.debitUsage(t.ctx.database.db, { userId: spender.id, amountMicros: 6_000_000n, reference: `spent-${spender.id}`, description: 'usage' });
      const refused = await refund(id, { reason: 'fraud' });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toContain('allow_negative');
      expect(await balance(spender)).toBe(4_000_000n);
      expect((await refund(id, { amount: 4, reason: 'what is left' })).status).toBe(200);
      expect(await balance(spender)).toBe(0n);
      const allowed = await refund(id, { reason: 'fraud', allow_negative: true });
      expect(allowed.status).toBe(200);
      expect(allowed.body.payment.refunded_amount).toBe(10);
      expect(await balance(spender)).toBe(-6_000_000n);
      expect(await ledgerSumMicros(t.ctx, spender.id)).toBe(-6_000_000n);
    });

    test('the OpenAPI document shows the refund endpoint and refunded_amount on the payments', async () => {
      const doc = (await t.request('GET', '/api/docs/json')).body;
      const refundOp = doc.paths['/api/admin/payments/{id}/refund'].post;
      expect(refundOp.parameters.map((x: { name: string }) => x.name)).toEqual(['id', 'idempotency-key']);
      expect(refundOp.requestBody.content['application/json'].schema).toMatchObject({ required: ['reason'], properties: { amount: { type: 'number' }, reason: { type: 'string' }, allow_negative: { type: 'boolean' } } });
      const answer = refundOp.responses['200'].content['application/json'].schema;
      expect(answer.properties.payment.properties.refunded_amount).toMatchObject({ type: 'number' });
      expect(answer.properties.payment.properties.refunds.items.properties).toHaveProperty('provider_refund_id');
      for (const [path, pick] of [
        ['/api/billing/payments', (x: any) => x.properties.payments.items],
        ['/api/billing/payments/{id}', (x: any) => x],
        ['/api/admin/payments', (x: any) => x.properties.payments.items],
      ] as const)
        expect(pick(doc.paths[path].get.responses['200'].content['application/json'].schema).required).toContain('refunded_amount');
    });

    test('each refund is audited with its actor, amount and reason; a refused one is not', async () => {
      const buyer = await makeUser(t);
      const id = await paid(buyer, 9);
      const res = await refund(id, { amount: 2, reason: 'goodwill', allow_negative: true });
      const [entry] = await auditEntries(t, admin.token);
      expect(entry).toMatchObject({
        actor_id: admin.id,
        actor_email: 'refund-admin@ops.example',
        action: 'payment.refund',
        target: id,
        details: { user_id: buyer.id, refund_id: res.body.payment.refunds[0].id, amount: 2, currency: 'USD', reason: 'goodwill', allow_negative: true },
      });
      const audited = (await auditEntries(t, admin.token)).length;
      expect((await refund(id, { amount: 8, reason: 'too much' })).status).toBe(400);
      expect((await auditEntries(t, admin.token)).length).toBe(audited);
    });
  });
}

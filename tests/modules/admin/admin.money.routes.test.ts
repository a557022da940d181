import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { rmSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { ledgerSumMicros } from '../billing/support';
import { bundleFiles, makeBundle, publish } from '../registry/support';
import { auditEntries } from './support';

for (const kind of DB_KINDS) {
  describe(`adjustments, audit, admin payments (${kind})`, () => {
    let t: TestApp;
    let admin: Awaited<ReturnType<typeof makeUser>>;
    let user: Awaited<ReturnType<typeof makeUser>>;
    beforeAll(async () => {
      t = await createTestApp(kind);
      admin = await makeUser(t, { admin: true, email: 'money-admin@ops.example' });
      user = await makeUser(t);
    });
    afterAll(() => t.close());

    const adjust = (body: unknown, key?: string, target = user.id) =>
      t.request('POST', `/api/admin/users/${target}/adjustments`, { token: admin.token, body, headers: key ? { 'idempotency-key': key } : {} });
    const balance = () => t.services.billing.getBalanceMicros(user.id);

    test('a signed adjustment is an `adjustment` entry whose description is the reason; the actor is audited in the same transaction', async () => {
      const res = await adjust({ amount: 10.123456, reason: 'refund for outage #42' }, 'k-credit');
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        transaction: { id: expect.any(String), type: 'adjustment', amount: 10.123456, currency: 'USD', created_at: expect.any(String), description: 'refund for outage #42' },
      });
      expect(await balance()).toBe(10_123_456n);
      const listed = await t.request('GET', '/api/billing/transactions', { token: user.token });
      expect(listed.body.transactions[0]).toEqual(res.body.transaction);
      expect((await auditEntries(t, admin.token))[0]).toMatchObject({
        actor_id: admin.id,
        actor_email: 'money-admin@ops.example',
        action: 'wallet.adjust',
        target: user.id,
        details: { transaction_id: res.body.transaction.id, amount: 10.123456, currency: 'USD', reason: 'refund for outage #42', allow_negative: false },
      });

      const debit = await adjust({ amount: -0.123456, reason: 'correction' });
      expect(debit.status).toBe(201);
      expect(debit.body.transaction.amount).toBe(-0.123456);
      expect(await balance()).toBe(10_000_000n);
      expect(await ledgerSumMicros(t.ctx, user.id)).toBe(await balance());
    });

    test('Idempotency-Key: the same key and body answer the same entry once; another body is 409', async () => {
      const body = { amount: 1.5, reason: 'goodwill' };
      const before = await balance();
      const audited = (await auditEntries(t, admin.token)).length;
      const answers = await Promise.all([adjust(body, 'k-same'), adjust(body, 'k-same'), adjust(body, 'k-same')]);
      expect(answers.map((a) => a.status)).toEqual([201, 201, 201]);
      expect(new Set(answers.map((a) => a.body.transaction.id)).size).toBe(1);
      expect(await balance()).toBe(before + 1_500_000n);
      expect((await auditEntries(t, admin.token)).length).toBe(audited + 1);
      for (const other of [{ amount: 2, reason: 'goodwill' }, { amount: 1.5, reason: 'other reason' }]) {
        const res = await adjust(other, 'k-same');
        expect(res.status).toBe(409);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      expect(await balance()).toBe(before + 1_500_000n);
    });

    test('bad adjustments are 400 and change nothing: zero, more than 6 decimals, no reason, a reason over 500 characters', async () => {
      const before = await balance();
      const audited = (await auditEntries(t, admin.token)).length;
      const bad = [
        { amount: 0, reason: 'zero' },
        { amount: -0, reason: 'negative zero' },
        { amount: 1.0000001, reason: 'seven decimals' },
        { amount: 1e-7, reason: 'tiny' },
        { amount: 1e21, reason: 'huge' },
        { amount: '5', reason: 'string amount' },
        { amount: 5 },
        { amount: 5, reason: '' },
        { amount: 5, reason: '   ' },
        { amount: 5, reason: 'x'.repeat(501) },
        { reason: 'no amount' },
      ];
      for (const body of bad) {
        const res = await adjust(body);
        expect({ body, status: res.status }).toEqual({ body, status: 400 });
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      expect((await adjust({ amount: 5, reason: 'x'.repeat(500) })).status).toBe(201);
      expect(await balance()).toBe(before + 5_000_000n);
      expect((await auditEntries(t, admin.token)).length).toBe(audited + 1);
      expect((await adjust({ amount: 5, reason: 'nobody' }, undefined, 'usr_unknown')).status).toBe(404);
    });

    test('below zero only with allow_negative: true', async () => {
      const poor = await makeUser(t);
      await adjust({ amount: 1, reason: 'seed' }, undefined, poor.id);
      const refused = await adjust({ amount: -1.000001, reason: 'too much' }, undefined, poor.id);
      expect(refused.status).toBe(409);
      expect(refused.body.error).toContain('allow_negative');
      expect(await t.services.billing.getBalanceMicros(poor.id)).toBe(1_000_000n);
      expect((await adjust({ amount: -1, reason: 'to exactly zero' }, undefined, poor.id)).status).toBe(201);
      const allowed = await adjust({ amount: -3, reason: 'chargeback', allow_negative: true }, undefined, poor.id);
      expect(allowed.status).toBe(201);
      expect(await t.services.billing.getBalanceMicros(poor.id)).toBe(-3_000_000n);
      expect(await ledgerSumMicros(t.ctx, poor.id)).toBe(-3_000_000n);
    });

    test('the audit log is append-only: the database refuses UPDATE and DELETE', async () => {
      const [first] = await auditEntries(t, admin.token);
      await expect(t.ctx.database.query(sql`update audit_log set action = 'forged' where id = ${first!.id}`)).rejects.toThrow();
      await expect(t.ctx.database.query(sql`delete from audit_log`)).rejects.toThrow();
      expect((await auditEntries(t, admin.token))[0]).toEqual(first!);
    });

    test('the audit list pages with cursors, newest first; bad limit or cursor 400', async () => {
      const all = await auditEntries(t, admin.token);
      const firstPage = await t.request('GET', '/api/admin/audit?limit=2', { token: admin.token });
      expect(firstPage.body.entries).toEqual(all.slice(0, 2));
      const second = await t.request('GET', `/api/admin/audit?limit=2&cursor=${firstPage.body.next_cursor}`, { token: admin.token });
      expect(second.body.entries).toEqual(all.slice(2, 4));
      for (const q of ['limit=0', 'limit=201', 'cursor=garbage!'])
        expect((await t.request('GET', `/api/admin/audit?${q}`, { token: admin.token })).status).toBe(400);
    });

    test('pricing, model and backend edits are audited (a backend key never is)', async () => {
      const models = [{ slug: 'audited-8b', unit: 'per_million_tokens', price: 0.25 }];
      expect((await t.request('PUT', '/api/admin/billing/pricing/models', { token: admin.token, body: { models } })).status).toBe(200);
      expect((await auditEntries(t, admin.token))[0]).toMatchObject({ action: 'pricing.models', target: 'pricing', actor_id: admin.id, details: { models } });
      const gpus = [{ name: 'H100', hourly_price: 2.5 }];
      expect((await t.request('PUT', '/api/admin/billing/pricing/gpus', { token: admin.token, body: { gpus } })).status).toBe(200);
      expect((await auditEntries(t, admin.token))[0]).toMatchObject({ action: 'pricing.gpus', details: { gpus } });

      const dir = makeBundle(bundleFiles(3));
      await publish(t, { path: dir, slug: 'audited', quant: 'int4', sdk: 'v1.0' });
      rmSync(dir, { recursive: true, force: true });
      expect((await t.request('PUT', '/api/admin/models/audited', { token: admin.token, body: { name: 'Audited Model' } })).status).toBe(200);
      expect((await auditEntries(t, admin.token))[0]).toMatchObject({ action: 'model.update', target: 'audited', details: { name: 'Audited Model' } });
      const backends = [{ model: 'audited-8b', url: 'http://127.0.0.1:9/v1', api_key: 'sk-never-in-the-log', weight: 3 }];
      expect((await t.request('PUT', '/api/admin/router/backends', { token: admin.token, body: { backends } })).status).toBe(200);
      const [entry] = await auditEntries(t, admin.token);
      expect(entry).toMatchObject({ action: 'router.backends', target: 'router', details: { backends: [{ model: 'audited-8b', url: 'http://127.0.0.1:9/v1', weight: 3, api_key: true }] } });
      expect(JSON.stringify(entry)).not.toContain('sk-never-in-the-log');
      // A refused write is not audited.
      const before = (await auditEntries(t, admin.token)).length;
      expect((await t.request('PUT', '/api/admin/models/nope', { token: admin.token, body: { name: 'X' } })).status).toBe(404);
      expect((await auditEntries(t, admin.token)).length).toBe(before);
    });

    test('admin payments: every account with email, filtered by status, provider and user; reconcile answers the payment and is audited', async () => {
      const other = await makeUser(t, { email: 'payer@ops.example' });
      const pay = async (who: { token: string }, amount: number) => {
        const res = await t.request('POST', '/api/billing/payments', { token: who.token, body: { provider: 'card', amount, currency: 'USD' } });
        expect(res.status).toBe(201);
        return res.body.id as string;
      };
      const a = await pay(user, 10);
      const b = await pay(other, 20);
      await t.services.billing.sandbox!.decide(b, 'paid');

      const all = await t.request('GET', '/api/admin/payments', { token: admin.token });
      expect(all.status).toBe(200);
      expect(all.body.payments.map((p: { id: string }) => p.id)).toEqual([b, a]);
      expect(all.body.payments[0]).toEqual({
        id: b,
        user_id: other.id,
        email: 'payer@ops.example',
        provider: 'card',
        amount: 20,
        currency: 'USD',
        status: 'paid',
        created_at: expect.any(String),
        paid_at: expect.any(String),
        provider_ref: expect.stringMatching(/^sbx_/),
        failure: null,
        refunded_amount: 0,
        refunds: [],
      });
      const ids = async (q: string) => (await t.request('GET', `/api/admin/payments?${q}`, { token: admin.token })).body.payments.map((p: { id: string }) => p.id);
      expect(await ids('status=pending')).toEqual([a]);
      expect(await ids(`user_id=${other.id}`)).toEqual([b]);
      expect(await ids('provider=card&status=paid')).toEqual([b]);
      expect(await ids('provider=card&limit=1')).toEqual([b]);
      for (const q of ['status=done', 'provider=paypal', 'limit=0', 'cursor=zzz'])
        expect((await t.request('GET', `/api/admin/payments?${q}`, { token: admin.token })).status).toBe(400);

      // The sandbox provider keeps no state of its own: asked, it says pending.
      const reconciled = await t.request('POST', `/api/admin/payments/${a}/reconcile`, { token: admin.token });
      expect(reconciled.status).toBe(200);
      expect(reconciled.body).toMatchObject({ id: a, status: 'pending', user_id: user.id, email: user.email });
      expect((await auditEntries(t, admin.token))[0]).toMatchObject({ action: 'payment.reconcile', target: a, details: { from: 'pending', to: 'pending' } });
      expect((await t.request('POST', '/api/admin/payments/pay_unknown/reconcile', { token: admin.token })).status).toBe(404);
    });
  });
}

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { startFakeAlipay } from '../billing/fakes/alipay';
import { startFakeWechat } from '../billing/fakes/wechat';
import { manualClock } from '../../support/clock';
import { ledgerSumMicros } from '../billing/support';
import { auditEntries } from './support';

describe('admin reconcile against a local WeChat Pay whose notification was lost (postgres)', () => {
  const wechat = startFakeWechat();
  const alipay = startFakeAlipay();
  const clock = manualClock();
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof makeUser>>;
  let user: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    t = await createTestApp('postgres', { SITE: 'cn', PAYMENT_MODE: 'live', ...wechat.env, ...alipay.env }, { clock });
    admin = await makeUser(t, { admin: true });
    user = await makeUser(t);
  });
  afterAll(async () => {
    await t.close();
    wechat.stop();
    alipay.stop();
  });

  const create = async (amount: number) => {
    const res = await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider: 'chat_wallet', amount, currency: 'CNY' } });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  const reconcile = (id: string) => t.request('POST', `/api/admin/payments/${id}/reconcile`, { token: admin.token });
  const balance = () => t.services.billing.getBalanceMicros(user.id);

  test('a paid order is settled at once (no waiting for the poll grace), credited exactly once however often it is asked', async () => {
    const id = await create(8);
    wechat.pay(id); // the payer paid; the notification never arrives
    const before = await balance();
    const res = await reconcile(id);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, status: 'paid', user_id: user.id, email: user.email, amount: 8, currency: 'CNY', provider_ref: wechat.orders.get(id)!.transaction_id, failure: null });
    const again = await Promise.all([reconcile(id), reconcile(id), reconcile(id)]);
    expect(again.map((r) => r.body.status)).toEqual(['paid', 'paid', 'paid']);
    expect(await balance()).toBe(before + 8_000_000n);
    expect(await ledgerSumMicros(t.ctx, user.id)).toBe(await balance());
    const entries = (await auditEntries(t, admin.token)).filter((e) => e.target === id);
    expect(entries).toHaveLength(4);
    expect(entries.at(-1)).toMatchObject({ action: 'payment.reconcile', actor_id: admin.id, details: { user_id: user.id, from: 'pending', to: 'paid' } });
  });

  test('an unpaid order stays pending; once expired and then paid at the provider, reconcile credits it (money received is never lost)', async () => {
    const id = await create(5);
    expect((await reconcile(id)).body.status).toBe('pending');
    clock.advance(31 * 60_000);
    expect((await reconcile(id)).body).toMatchObject({ status: 'expired', failure: expect.any(String) });
    const before = await balance();
    wechat.pay(id);
    expect((await reconcile(id)).body.status).toBe('paid');
    expect((await reconcile(id)).body.status).toBe('paid');
    expect(await balance()).toBe(before + 5_000_000n);
  });
});

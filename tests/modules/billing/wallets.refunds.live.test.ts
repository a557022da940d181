/**
 * Refunds of WeChat Pay and Alipay top-ups in live mode, against local servers speaking each
 * provider's refund protocol and signatures: admin refunds through their refund APIs, refunds
 * made at the merchant platform or console arriving as notifications, each applied exactly once
 * whatever is replayed or reordered.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { manualClock } from '../../support/clock';
import { makeUser } from '../../support/make';
import { startFakeAlipay } from './fakes/alipay';
import { startFakeWechat } from './fakes/wechat';
import { ledgerSumMicros } from './support';

type User = Awaited<ReturnType<typeof makeUser>>;
type Notice = { body: string; headers: Record<string, string> };

describe('WeChat Pay and Alipay refunds in live mode (postgres)', () => {
  const wechat = startFakeWechat();
  const alipay = startFakeAlipay();
  const clock = manualClock();
  let t: TestApp;
  let admin: User;
  beforeAll(async () => {
    t = await createTestApp('postgres', { SITE: 'cn', PAYMENT_MODE: 'live', ...wechat.env, ...alipay.env }, { clock });
    admin = await makeUser(t, { admin: true });
  });
  afterAll(async () => {
    await t.close();
    wechat.stop();
    alipay.stop();
  });

  const deliver = (provider: string, n: Notice) => t.request('POST', `/api/payments/webhooks/${provider}`, { body: n.body, headers: n.headers });
  /** A new user's top-up of `amount` CNY, paid at the provider; its paid notification delivered unless told otherwise. */
  async function paidPayment(provider: 'chat_wallet' | 'app_wallet', amount: number, opts: { deliverPaid?: boolean } = {}) {
    const user = await makeUser(t);
    const res = await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider, amount, currency: 'CNY' } });
    expect(res.status).toBe(201);
    const id = res.body.id as string;
    const paid = provider === 'chat_wallet' ? wechat.pay(id) : alipay.pay(id);
    if (opts.deliverPaid !== false) expect((await deliver(provider, paid)).status).toBeLessThan(300);
    return { user, id, paid };
  }
  const refund = (id: string, body: unknown, key?: string) =>
    t.request('POST', `/api/admin/payments/${id}/refund`, { token: admin.token, body, headers: key ? { 'idempotency-key': key } : {} });
  const balance = (user: User) => t.services.billing.getBalanceMicros(user.id);
  const payment = async (user: User, id: string) => (await t.request('GET', `/api/billing/payments/${id}`, { token: user.token })).body;
  const refundsOf = async (id: string) => (await t.request('GET', '/api/admin/payments?limit=200', { token: admin.token })).body.payments.find((p: { id: string }) => p.id === id).refunds;
  const exact = async (user: User) => expect(await ledgerSumMicros(t.ctx, user.id)).toBe(await balance(user));

  describe('WeChat Pay', () => {
    test('an admin refund is a signed refund request with our refund id as out_refund_no; REFUND.SUCCESS (twice) confirms it without a second debit', async () => {
      const { user, id } = await paidPayment('chat_wallet', 30);
      wechat.refundBehaviour.status = 'PROCESSING';
      const res = await refund(id, { amount: 12.5, reason: '用户申请退款' }, 'wx-1');
      wechat.refundBehaviour.status = 'SUCCESS';
      expect(res.status).toBe(200);
      const [ours] = res.body.payment.refunds;
      const atWechat = wechat.refunds.get(ours.id)!;
      expect(atWechat).toMatchObject({ out_trade_no: id, refund: 1250, total: 3000, reason: '用户申请退款', notify_url: 'http://localhost:8080/api/payments/webhooks/chat_wallet' });
      expect(ours).toMatchObject({ status: 'pending', provider_refund_id: atWechat.refund_id });
      expect(await balance(user)).toBe(17_500_000n);
      const success = wechat.settleRefund(ours.id, 'SUCCESS');
      expect((await deliver('chat_wallet', success)).status).toBe(204);
      expect((await deliver('chat_wallet', success)).status).toBe(204);
      expect((await refundsOf(id))[0].status).toBe('succeeded');
      expect(await balance(user)).toBe(17_500_000n);
      expect(await payment(user, id)).toMatchObject({ status: 'paid', refunded_amount: 12.5 });
      // The same key: the same refund; WeChat Pay is not asked for a second one.
      expect((await refund(id, { amount: 12.5, reason: '用户申请退款' }, 'wx-1')).body.payment.refunds).toHaveLength(1);
      expect([...wechat.refunds.values()].filter((r) => r.out_trade_no === id)).toHaveLength(1);
      await exact(user);
    });

    test('refunds made at the merchant platform: notices replayed and in reverse order debit each refund once', async () => {
      const { user, id } = await paidPayment('chat_wallet', 50);
      const first = wechat.refundNotification(wechat.refundAtMerchantPlatform(id, 1000));
      const second = wechat.refundNotification(wechat.refundAtMerchantPlatform(id, 2500));
      for (const n of [second, first, second, first]) expect((await deliver('chat_wallet', n)).status).toBe(204);
      expect(await balance(user)).toBe(15_000_000n);
      expect((await refundsOf(id)).map((r: { amount: number; source: string }) => [r.amount, r.source]).sort()).toEqual([
        [10, 'provider'],
        [25, 'provider'],
      ]);
      expect((await payment(user, id)).refunded_amount).toBe(35);
      await exact(user);
    });

    test('a refund notice for a payment whose paid notice comes later: settled from the order query, then refunded, each once', async () => {
      const { user, id, paid } = await paidPayment('chat_wallet', 20, { deliverPaid: false });
      const notice = wechat.refundNotification(wechat.refundAtMerchantPlatform(id, 800));
      expect((await deliver('chat_wallet', notice)).status).toBe(204);
      expect(await payment(user, id)).toMatchObject({ status: 'paid', refunded_amount: 8 });
      expect((await deliver('chat_wallet', paid)).status).toBe(204);
      expect((await deliver('chat_wallet', notice)).status).toBe(204);
      expect(await balance(user)).toBe(12_000_000n);
      await exact(user);
    });

    test('NOT_ENOUGH is a refusal: 409, the debit reversed; a refund closed later (REFUND.CLOSED) is credited back once', async () => {
      const { user, id } = await paidPayment('chat_wallet', 10);
      wechat.refundBehaviour.notEnough = true;
      const refused = await refund(id, { reason: 'merchant short' });
      wechat.refundBehaviour.notEnough = false;
      expect(refused.status).toBe(409);
      expect(refused.body.error).toContain('NOT_ENOUGH');
      expect(await balance(user)).toBe(10_000_000n);
      expect((await payment(user, id)).refunded_amount).toBe(0);

      wechat.refundBehaviour.status = 'PROCESSING';
      const res = await refund(id, { amount: 4, reason: 'second try' });
      wechat.refundBehaviour.status = 'SUCCESS';
      expect(await balance(user)).toBe(6_000_000n);
      const closed = wechat.settleRefund(res.body.payment.refunds.at(-1).id, 'CLOSED');
      expect((await deliver('chat_wallet', closed)).status).toBe(204);
      expect((await deliver('chat_wallet', closed)).status).toBe(204);
      expect(await balance(user)).toBe(10_000_000n);
      expect((await refundsOf(id)).map((r: { status: string }) => r.status)).toEqual(['failed', 'failed']);
      await exact(user);
    });

    test('WeChat Pay down (SYSTEM_ERROR): the refund stays pending; the sweeper asks for it again with the same out_refund_no', async () => {
      const { user, id } = await paidPayment('chat_wallet', 9);
      wechat.refundBehaviour.down = true;
      const res = await refund(id, { reason: 'outage' });
      wechat.refundBehaviour.down = false;
      expect(res.status).toBe(200);
      const [ours] = res.body.payment.refunds;
      expect(ours.status).toBe('pending');
      expect(wechat.refunds.has(ours.id)).toBe(false);
      clock.advance(6 * 60_000);
      await t.services.billing.refunds.settlePending();
      expect(wechat.refunds.get(ours.id)).toMatchObject({ refund: 900, status: 'SUCCESS' });
      expect((await refundsOf(id))[0]).toMatchObject({ status: 'succeeded', provider_refund_id: wechat.refunds.get(ours.id)!.refund_id });
      expect(await balance(user)).toBe(0n);
      await exact(user);
    });
  });

  describe('Alipay', () => {
    test('an admin refund is alipay.trade.refund with our refund id as out_request_no; its notice (twice) debits nothing more', async () => {
      const { user, id } = await paidPayment('app_wallet', 66.6);
      const res = await refund(id, { amount: 16.6, reason: '退款' }, 'ali-1');
      expect(res.status).toBe(200);
      const [ours] = res.body.payment.refunds;
      const trade = alipay.trades.get(id)!;
      expect([...trade.refunds]).toEqual([[ours.id, 1660]]);
      expect(ours).toMatchObject({ status: 'succeeded', provider_refund_id: `${trade.trade_no}:${ours.id}` });
      expect(await balance(user)).toBe(50_000_000n);
      const notice = alipay.refundNotification(id, ours.id);
      const answers = await Promise.all([deliver('app_wallet', notice), deliver('app_wallet', notice)]);
      expect(answers.map((a) => a.text)).toEqual(['success', 'success']);
      expect(await balance(user)).toBe(50_000_000n);
      expect((await refund(id, { amount: 16.6, reason: '退款' }, 'ali-1')).body.payment.refunded_amount).toBe(16.6);
      expect(trade.refunds.size).toBe(1);
      await exact(user);
    });

    test('console refunds: each notice carries only the running total, so each refund is asked for its own amount, in any order, once', async () => {
      const { user, id } = await paidPayment('app_wallet', 40);
      const a = alipay.refundAtConsole(id, 500);
      const first = alipay.refundNotification(id, a);
      const b = alipay.refundAtConsole(id, 3500); // refunds it all: the trade closes
      const second = alipay.refundNotification(id, b);
      expect(second.body).toContain('trade_status=TRADE_CLOSED');
      for (const n of [second, first, first, second]) expect((await deliver('app_wallet', n)).text).toBe('success');
      expect(await balance(user)).toBe(0n);
      expect((await refundsOf(id)).map((r: { amount: number }) => r.amount).sort((x: number, y: number) => x - y)).toEqual([5, 35]);
      expect(await payment(user, id)).toMatchObject({ status: 'paid', refunded_amount: 40 });
      await exact(user);
    });

    test("the seller's balance short is a refusal: 409, nothing refunded; a forged refund notice is 400", async () => {
      const { user, id } = await paidPayment('app_wallet', 12);
      alipay.refundBehaviour.balanceShort = true;
      const refused = await refund(id, { reason: 'short' });
      alipay.refundBehaviour.balanceShort = false;
      expect(refused.status).toBe(409);
      expect(refused.body.error).toContain('ACQ.SELLER_BALANCE_NOT_ENOUGH');
      expect(await balance(user)).toBe(12_000_000n);
      const real = alipay.refundNotification(id, alipay.refundAtConsole(id, 100));
      expect((await deliver('app_wallet', { body: real.body.replace('refund_fee=1.00', 'refund_fee=12.00'), headers: real.headers })).status).toBe(400);
      expect(await balance(user)).toBe(12_000_000n);
      expect((await deliver('app_wallet', real)).text).toBe('success');
      expect(await balance(user)).toBe(11_000_000n);
      await exact(user);
    });
  });
});

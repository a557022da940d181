import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { waitFor } from '../../support/wait';
import { startFakeAlipay } from './fakes/alipay';
import { startFakeWechat } from './fakes/wechat';
import { manualClock } from '../../support/clock';
import { ledgerSumMicros } from './support';

const FIVE_MINUTES = 5 * 60_000;

describe('failed and expired payments are asked about again and credited once when paid late (postgres)', () => {
  const wechat = startFakeWechat();
  const alipay = startFakeAlipay();
  const clock = manualClock();
  let t: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    t = await createTestApp('postgres', { SITE: 'cn', PAYMENT_MODE: 'live', PAYMENT_RECHECK_WINDOW: '24h', SESSION_TTL: '30d', ...wechat.env, ...alipay.env }, { clock });
    user = await makeUser(t);
  });
  afterAll(async () => {
    await t.close();
    wechat.stop();
    alipay.stop();
  });

  const payments = () => t.services.billing.payments;
  const create = async (provider: string, amount: number) => {
    const res = await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider, amount, currency: 'CNY' } });
    expect(res.status).toBe(201);
    return res.body as { id: string };
  };
  const status = async (id: string) => (await t.request('GET', `/api/billing/payments/${id}`, { token: user.token })).body.status;
  const balance = () => t.services.billing.getBalanceMicros(user.id);
  const expectLedgerMatches = async () => expect(await ledgerSumMicros(t.ctx, user.id)).toBe(await balance());

  test('an expired WeChat Pay order paid after its close is credited by the recheck, once', async () => {
    const p = await create('chat_wallet', 7);
    clock.advance(30 * 60_000);
    expect(await status(p.id)).toBe('expired');
    expect(wechat.orders.get(p.id)!.trade_state).toBe('CLOSED');
    const before = await balance();

    wechat.pay(p.id); // completed late at the provider; its notification never arrives
    await payments().recheckClosed();
    expect(await status(p.id)).toBe('expired'); // asked at expiry: not again within five minutes
    clock.advance(FIVE_MINUTES);
    await payments().recheckClosed();
    expect(await status(p.id)).toBe('paid');
    expect(await balance()).toBe(before + 7_000_000n);

    clock.advance(FIVE_MINUTES);
    const asked = wechat.queries.get(p.id);
    await payments().recheckClosed();
    expect(wechat.queries.get(p.id)).toBe(asked!); // paid is final: never asked again
    expect(await balance()).toBe(before + 7_000_000n);
    await expectLedgerMatches();
  });

  test('a failed payment that the payer completes later is credited', async () => {
    const p = await create('chat_wallet', 2.5);
    expect((await t.request('POST', '/api/payments/webhooks/chat_wallet', wechat.payError(p.id))).status).toBe(204);
    expect(await status(p.id)).toBe('failed');
    const before = await balance();
    wechat.pay(p.id);
    await payments().recheckClosed();
    expect(await status(p.id)).toBe('paid');
    expect(await balance()).toBe(before + 2_500_000n);
    await expectLedgerMatches();
  });

  test('a late Alipay payment is credited too; an unpaid one stays expired and is not credited', async () => {
    const paidLate = await create('app_wallet', 3);
    const neverPaid = await create('app_wallet', 4);
    alipay.scan(paidLate.id);
    clock.advance(30 * 60_000);
    await payments().sweep();
    expect(await status(paidLate.id)).toBe('expired');
    const before = await balance();
    alipay.pay(paidLate.id);
    clock.advance(FIVE_MINUTES);
    await payments().recheckClosed();
    expect(await status(paidLate.id)).toBe('paid');
    expect(await status(neverPaid.id)).toBe('expired');
    expect(await balance()).toBe(before + 3_000_000n);
  });

  test('past PAYMENT_RECHECK_WINDOW a payment is no longer asked about', async () => {
    const p = await create('chat_wallet', 9);
    clock.advance(30 * 60_000);
    expect(await status(p.id)).toBe('expired');
    clock.advance(24 * 3_600_000);
    wechat.pay(p.id);
    const asked = wechat.queries.get(p.id) ?? 0;
    await payments().recheckClosed();
    expect(wechat.queries.get(p.id) ?? 0).toBe(asked);
    expect(await status(p.id)).toBe('expired');
    // The operator can still reconcile it by hand: money received is never lost.
    const before = await balance();
    expect((await t.services.billing.reconcilePayment(p.id)).status).toBe('paid');
    expect(await balance()).toBe(before + 9_000_000n);
  });

  test('reconcilePayment asks at once; racing the recheck and the late notification still credits once', async () => {
    const p = await create('chat_wallet', 11);
    clock.advance(30 * 60_000);
    expect(await status(p.id)).toBe('expired');
    const before = await balance();
    const late = wechat.pay(p.id);
    clock.advance(FIVE_MINUTES);
    const results = await Promise.all([
      t.services.billing.reconcilePayment(p.id),
      t.services.billing.reconcilePayment(p.id),
      payments().recheckClosed(),
      t.request('POST', '/api/payments/webhooks/chat_wallet', late),
    ]);
    expect(results[0]).toMatchObject({ id: p.id, status: 'paid' });
    expect(results[1]).toMatchObject({ id: p.id, status: 'paid' });
    expect(await balance()).toBe(before + 11_000_000n);
    await expectLedgerMatches();
  });

  test('reconcilePayment on a pending payment asks before the poll grace; an unknown id is not found', async () => {
    const p = await create('chat_wallet', 6);
    wechat.pay(p.id);
    expect((await t.services.billing.reconcilePayment(p.id)).status).toBe('paid');
    await expect(t.services.billing.reconcilePayment('pay_unknown')).rejects.toMatchObject({ kind: 'not_found' });
  });

  test('the sweeper runs the recheck on its own', async () => {
    const p = await create('chat_wallet', 1);
    clock.advance(30 * 60_000);
    expect(await status(p.id)).toBe('expired');
    const before = await balance();
    wechat.pay(p.id);
    clock.advance(FIVE_MINUTES);
    const stop = t.services.billing.startSweeper(50);
    try {
      await waitFor(async () => (await balance()) === before + 1_000_000n, 'the sweeper credits the late payment');
    } finally {
      stop();
    }
    expect(await status(p.id)).toBe('paid');
    await expectLedgerMatches();
  });
});

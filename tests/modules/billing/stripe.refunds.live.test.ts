/**
 * Refunds and disputes of card payments in live mode, against the local Stripe: an admin refund
 * through the Refunds API, and refunds and disputes started at Stripe (charge.refunded,
 * charge.refund.updated, charge.dispute.created / closed), each applied exactly once whatever
 * Stripe replays or reorders.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { manualClock } from '../../support/clock';
import { makeUser } from '../../support/make';
import { parseMetrics } from '../../support/prometheus';
import { startFakeStripe } from './fakes/stripe';
import { ledgerSumMicros } from './support';

const SECRET_KEY = 'sk_test_cpd_refunds_0123';
const WEBHOOK_SECRET = 'whsec_cpd_refunds_0123';

type User = Awaited<ReturnType<typeof makeUser>>;
type Event = { body: string; headers: Record<string, string> };

describe('card refunds and disputes in live mode against a local Stripe (postgres)', () => {
  const stripe = startFakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET });
  const env = { SITE: 'intl', PAYMENT_MODE: 'live', STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_URL: stripe.url };
  const clock = manualClock();
  let t: TestApp;
  let admin: User;
  beforeAll(async () => {
    t = await createTestApp('postgres', env, { clock });
    admin = await makeUser(t, { admin: true });
  });
  afterAll(async () => {
    await t.close();
    stripe.stop();
  });

  const deliver = (event: Event) => t.request('POST', '/api/payments/webhooks/card', { body: event.body, headers: event.headers });
  /** A new user whose card top-up of `amount` USD was paid at Stripe and whose checkout.session.completed came through. */
  async function paidPayment(amount: number, opts: { deliverPaid?: boolean } = {}) {
    const user = await makeUser(t);
    const res = await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider: 'card', amount, currency: 'USD' } });
    expect(res.status).toBe(201);
    const paid = await stripe.pay(res.body.id);
    if (opts.deliverPaid !== false) expect((await deliver(paid)).status).toBe(200);
    return { user, id: res.body.id as string, paidEvent: paid };
  }
  const refund = (id: string, body: unknown, key?: string) =>
    t.request('POST', `/api/admin/payments/${id}/refund`, { token: admin.token, body, headers: key ? { 'idempotency-key': key } : {} });
  const balance = (user: User) => t.services.billing.getBalanceMicros(user.id);
  const payment = async (user: User, id: string) => (await t.request('GET', `/api/billing/payments/${id}`, { token: user.token })).body;
  const adminView = async (id: string) => (await t.request('GET', `/api/admin/payments?limit=200`, { token: admin.token })).body.payments.find((p: { id: string }) => p.id === id);
  const refundEntries = async (user: User) =>
    (await t.request('GET', '/api/billing/transactions', { token: user.token })).body.transactions.filter((x: { description: string }) => x.description.startsWith('Refund of payment'));
  const counted = async (status: string) => parseMetrics((await t.ctx.metrics.scrape()).text).value('cpd_payments_total', { provider: 'card', status });
  const exact = async (user: User) => expect(await ledgerSumMicros(t.ctx, user.id)).toBe(await balance(user));

  test('an admin refund goes through the Refunds API (our refund id as metadata and idempotency key); Stripe\'s own notice of it debits nothing more', async () => {
    const { user, id } = await paidPayment(25);
    const res = await refund(id, { amount: 10, reason: 'requested by the customer' }, 'stripe-1');
    expect(res.status).toBe(200);
    const [ours] = res.body.payment.refunds;
    const atStripe = [...stripe.refunds.values()].find((r) => r.payment_intent === stripe.sessionFor(id).payment_intent)!;
    expect(atStripe).toMatchObject({ amount: 1000, status: 'succeeded', metadata: { refund_id: ours.id, payment_id: id } });
    expect(stripe.refundKeys.at(-1)).toBe(`cpd-refund-${ours.id}`);
    expect(ours).toMatchObject({ status: 'succeeded', provider_refund_id: atStripe.id, amount: 10 });
    expect(res.body.payment).toMatchObject({ status: 'paid', refunded_amount: 10 });
    expect(await balance(user)).toBe(15_000_000n);

    // Stripe tells us about the refund we made, twice: one debit, never two.
    const notice = await stripe.chargeRefunded(id);
    expect((await deliver(notice)).status).toBe(200);
    expect((await deliver(notice)).status).toBe(200);
    expect(await balance(user)).toBe(15_000_000n);
    expect((await payment(user, id)).refunded_amount).toBe(10);
    expect((await refundEntries(user)).filter((x: { amount: number }) => x.amount < 0)).toHaveLength(1);
    // The same Idempotency-Key again: the same refund, Stripe not asked to refund twice.
    expect((await refund(id, { amount: 10, reason: 'requested by the customer' }, 'stripe-1')).body.payment.refunded_amount).toBe(10);
    expect([...stripe.refunds.values()].filter((r) => r.payment_intent === atStripe.payment_intent)).toHaveLength(1);
    await exact(user);
  });

  test('a refund made at the dashboard (charge.refunded, delivered twice) debits once, below zero if the money was spent', async () => {
    const { user, id } = await paidPayment(12);
    await t.services.billing.debitUsage(t.ctx.database.db, { userId: user.id, amountMicros: 10_000_000n, reference: `spent-${id}`, description: 'usage' });
    const refundedBefore = await counted('refunded');
    const atStripe = stripe.refundAtDashboard(id, 1200);
    const notice = await stripe.chargeRefunded(id);
    const answers = await Promise.all([deliver(notice), deliver(notice), deliver(notice)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(await balance(user)).toBe(-10_000_000n);
    expect(await payment(user, id)).toMatchObject({ status: 'paid', refunded_amount: 12 });
    expect((await adminView(id)).refunds).toEqual([
      expect.objectContaining({ kind: 'refund', source: 'provider', amount: 12, status: 'succeeded', provider_refund_id: atStripe.id }),
    ]);
    expect(await refundEntries(user)).toContainEqual(expect.objectContaining({ type: 'adjustment', amount: -12, description: `Refund of payment ${id}` }));
    expect(await counted('refunded')).toBe(refundedBefore + 1);
    await exact(user);
  });

  test('charge.refunded while Stripe cannot list the refunds is 502 and changes nothing; sent again, it is applied', async () => {
    const { user, id } = await paidPayment(7);
    stripe.refundAtDashboard(id, 200);
    const notice = await stripe.chargeRefunded(id);
    stripe.refundBehaviour.listDown = true;
    const failed = await deliver(notice);
    stripe.refundBehaviour.listDown = false;
    expect(failed.status).toBe(502);
    expect(failed.body).toEqual({ error: expect.any(String) });
    expect(await balance(user)).toBe(7_000_000n);
    expect((await deliver(notice)).status).toBe(200);
    expect(await balance(user)).toBe(5_000_000n);
    await exact(user);
  });

  test('two partial refunds whose notices arrive in reverse order are each debited once', async () => {
    const { user, id } = await paidPayment(30);
    stripe.refundAtDashboard(id, 500);
    const first = await stripe.chargeRefunded(id);
    stripe.refundAtDashboard(id, 700);
    const second = await stripe.chargeRefunded(id);
    expect((await deliver(second)).status).toBe(200);
    expect((await deliver(first)).status).toBe(200);
    expect((await deliver(second)).status).toBe(200);
    expect(await balance(user)).toBe(18_000_000n);
    expect((await refundEntries(user)).map((x: { amount: number }) => x.amount).sort((a: number, b: number) => a - b)).toEqual([-7, -5]);
    expect((await payment(user, id)).refunded_amount).toBe(12);
    await exact(user);
  });

  test('a refund notice for a payment whose paid notice comes later: the payment is settled first, then refunded, each once', async () => {
    const { user, id, paidEvent } = await paidPayment(40, { deliverPaid: false });
    expect((await payment(user, id)).status).toBe('pending');
    stripe.refundAtDashboard(id, 1500);
    expect((await deliver(await stripe.chargeRefunded(id))).status).toBe(200);
    expect(await payment(user, id)).toMatchObject({ status: 'paid', refunded_amount: 15 });
    expect(await balance(user)).toBe(25_000_000n);
    expect((await deliver(paidEvent)).status).toBe(200); // late: already paid, credits nothing
    expect(await balance(user)).toBe(25_000_000n);
    await exact(user);
  });

  test('an admin refund of what Stripe already refunded is refused by Stripe: 409, the debit is reversed, nothing is refunded twice', async () => {
    const { user, id } = await paidPayment(9);
    stripe.refundAtDashboard(id, 900); // its charge.refunded has not reached us yet
    const res = await refund(id, { reason: 'duplicate' });
    expect(res.status).toBe(409);
    expect(res.body.error).toContain('refused');
    expect(await balance(user)).toBe(9_000_000n);
    expect((await adminView(id)).refunds).toEqual([expect.objectContaining({ source: 'admin', status: 'failed', amount: 9 })]);
    expect((await payment(user, id)).refunded_amount).toBe(0);
    // Then Stripe's notice of its own refund arrives: that one is debited, once.
    expect((await deliver(await stripe.chargeRefunded(id))).status).toBe(200);
    expect(await balance(user)).toBe(0n);
    expect((await payment(user, id)).refunded_amount).toBe(9);
    await exact(user);
  });

  test('a pending refund that later fails (charge.refund.updated) is credited back once', async () => {
    const { user, id } = await paidPayment(20);
    stripe.refundBehaviour.status = 'pending';
    const res = await refund(id, { amount: 5, reason: 'slow bank' });
    stripe.refundBehaviour.status = 'succeeded';
    expect(res.status).toBe(200);
    const [ours] = res.body.payment.refunds;
    expect(ours.status).toBe('pending');
    expect(await balance(user)).toBe(15_000_000n);
    const failed = await stripe.refundUpdated(ours.provider_refund_id, 'failed');
    expect((await deliver(failed)).status).toBe(200);
    expect((await deliver(failed)).status).toBe(200);
    expect(await balance(user)).toBe(20_000_000n);
    expect(await payment(user, id)).toMatchObject({ refunded_amount: 0 });
    expect((await adminView(id)).refunds[0]).toMatchObject({ status: 'failed' });
    // The rest can be refunded again.
    expect((await refund(id, { reason: 'again' })).body.payment.refunded_amount).toBe(20);
    expect(await balance(user)).toBe(0n);
    await exact(user);
  });

  test('Stripe not answering leaves the refund pending (debited once); the sweeper drives it to Stripe once', async () => {
    const { user, id } = await paidPayment(8);
    stripe.refundBehaviour.down = true;
    const res = await refund(id, { amount: 3, reason: 'outage' });
    stripe.refundBehaviour.down = false;
    expect(res.status).toBe(200);
    const [ours] = res.body.payment.refunds;
    expect(ours).toMatchObject({ status: 'pending', provider_refund_id: null });
    expect(await balance(user)).toBe(5_000_000n);
    const intent = stripe.sessionFor(id).payment_intent;
    expect([...stripe.refunds.values()].filter((r) => r.payment_intent === intent)).toHaveLength(0);
    await t.services.billing.refunds.settlePending();
    expect((await adminView(id)).refunds[0].status).toBe('pending'); // asked again only after a while
    clock.advance(6 * 60_000);
    await t.services.billing.refunds.settlePending();
    await t.services.billing.refunds.settlePending(); // settled: not asked again
    expect([...stripe.refunds.values()].filter((r) => r.payment_intent === intent)).toEqual([expect.objectContaining({ amount: 300, metadata: expect.objectContaining({ refund_id: ours.id }) })]);
    expect((await adminView(id)).refunds[0]).toMatchObject({ status: 'succeeded', provider_refund_id: expect.stringMatching(/^re_/) });
    expect(await balance(user)).toBe(5_000_000n);
    await exact(user);
  });

  test('a dispute debits the disputed amount once; won, it is credited back once; lost, it stays debited', async () => {
    const { user, id } = await paidPayment(50);
    const disputedBefore = await counted('disputed');
    const { dispute, created } = stripe.dispute(id, 2000);
    const event = await created;
    await Promise.all([deliver(event), deliver(event)]);
    expect(await balance(user)).toBe(30_000_000n);
    expect(await counted('disputed')).toBe(disputedBefore + 1);
    expect((await adminView(id)).refunds).toEqual([expect.objectContaining({ kind: 'dispute', source: 'provider', amount: 20, status: 'open', provider_refund_id: dispute.id })]);
    expect((await payment(user, id)).refunded_amount).toBe(20);
    const won = await stripe.disputeClosed(dispute, 'won');
    await Promise.all([deliver(won), deliver(won)]);
    expect(await balance(user)).toBe(50_000_000n);
    expect((await payment(user, id)).refunded_amount).toBe(0);
    expect((await adminView(id)).refunds[0].status).toBe('won');
    expect((await deliver(event)).status).toBe(200); // a late replay of the creation changes nothing
    expect(await balance(user)).toBe(50_000_000n);

    const second = stripe.dispute(id, 5000);
    expect((await deliver(await second.created)).status).toBe(200);
    expect((await deliver(await stripe.disputeClosed(second.dispute, 'lost'))).status).toBe(200);
    expect(await balance(user)).toBe(0n);
    expect((await adminView(id)).refunds.map((r: { status: string }) => r.status).sort()).toEqual(['lost', 'won']);
    await exact(user);
  });

  test('a dispute closed (won) before its creation reaches us moves no money, whatever comes after', async () => {
    const { user, id } = await paidPayment(10);
    const { dispute, created } = stripe.dispute(id, 1000);
    expect((await deliver(await stripe.disputeClosed(dispute, 'won'))).status).toBe(200);
    expect((await deliver(await created)).status).toBe(200);
    expect(await balance(user)).toBe(10_000_000n);
    expect((await payment(user, id)).refunded_amount).toBe(0);
    await exact(user);
  });

  test('refund and dispute events about charges cpd did not make are acknowledged and change nothing', async () => {
    const { user, id } = await paidPayment(6);
    const foreign = await stripe.event('charge.refunded', { ...stripe.chargeFor(id), id: 'ch_foreign', payment_intent: 'pi_not_ours', amount_refunded: 600 });
    expect((await deliver(foreign)).status).toBe(200);
    const bad = await stripe.chargeRefunded(id);
    expect((await deliver({ body: bad.body, headers: { ...bad.headers, 'stripe-signature': 't=1,v1=00' } })).status).toBe(400);
    expect(await balance(user)).toBe(6_000_000n);
  });
});

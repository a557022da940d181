import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { buildApp } from '../../../src/app';
import { createTestApp, createTestContext, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { startFakeStripe } from './fakes/stripe';
import { ledgerSumMicros } from './support';
import { manualClock } from '../../support/clock';

const SECRET_KEY = 'sk_test_cpd_0123456789';
const WEBHOOK_SECRET = 'whsec_cpd_test_0123456789';

describe('card in live mode: Stripe Checkout against a local Stripe (postgres)', () => {
  const stripe = startFakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET });
  const env = { SITE: 'intl', PAYMENT_MODE: 'live', STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_URL: stripe.url };
  const clock = manualClock();
  let t: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    t = await createTestApp('postgres', env, { clock });
    user = await makeUser(t);
  });
  afterAll(async () => {
    await t.close();
    stripe.stop();
  });

  const create = async (amount: number) => {
    const res = await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider: 'card', amount, currency: 'USD' } });
    expect(res.status).toBe(201);
    return res.body as { id: string; redirect_url: string; expires_at: string };
  };
  const deliver = (event: { body: string; headers: Record<string, string> }) =>
    t.request('POST', '/api/payments/webhooks/card', { body: event.body, headers: event.headers });
  const status = async (id: string) => (await t.request('GET', `/api/billing/payments/${id}`, { token: user.token })).body;
  const balance = () => t.services.billing.getBalanceMicros(user.id);

  test('create opens a Checkout Session carrying our payment id and amount; redirect_url is its url', async () => {
    const p = await create(25.5);
    const session = stripe.sessionFor(p.id);
    expect(p.redirect_url).toBe(session.url);
    expect(session).toMatchObject({ client_reference_id: p.id, amount_total: 2550, currency: 'usd' });
    // Stripe needs ≥ 30 minutes: the session outlives our own expiry, which closes it.
    expect(session.expires_at * 1000).toBeGreaterThanOrEqual(Date.parse(p.expires_at));
  });

  test('checkout.session.completed credits once, duplicated and late deliveries included', async () => {
    const p = await create(10);
    const before = await balance();
    const event = await stripe.pay(p.id);
    const first = await deliver(event);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ received: true });
    expect(await status(p.id)).toMatchObject({ status: 'paid', provider_reference: stripe.sessionFor(p.id).payment_intent });
    await Promise.all([deliver(event), deliver(event), deliver(event)]);
    // Reordered: an expiry event delivered after the payment does not undo it.
    expect((await deliver(await stripe.expireEvent(p.id))).status).toBe(200);
    expect((await status(p.id)).status).toBe('paid');
    expect(await balance()).toBe(before + 10_000_000n);
    expect(await ledgerSumMicros(t.ctx, user.id)).toBe(await balance());
  });

  test('a bad Stripe signature is 400 and changes nothing', async () => {
    const p = await create(10);
    const event = await stripe.pay(p.id);
    const tampered = event.body.replace('"amount_total":1000', '"amount_total":100000');
    expect((await deliver({ body: tampered, headers: event.headers })).status).toBe(400);
    expect((await deliver({ body: event.body, headers: { ...event.headers, 'stripe-signature': 't=1,v1=00' } })).status).toBe(400);
    expect((await t.request('GET', `/api/billing/payments/${p.id}`, { token: user.token })).body.status).toBe('pending');
  });

  test('events that are not about a cpd payment are acknowledged and change nothing', async () => {
    const before = await balance();
    const foreign = await stripe.event('checkout.session.completed', { ...stripe.sessionFor((await create(3)).id), client_reference_id: null, payment_status: 'paid' });
    expect((await deliver(foreign)).status).toBe(200);
    const other = await stripe.event('payment_intent.succeeded', { ...stripe.sessionFor((await create(4)).id) });
    expect((await deliver(other)).status).toBe(200);
    expect(await balance()).toBe(before);
  });

  test('checkout.session.expired expires the payment; a completed event after it still credits', async () => {
    const p = await create(12);
    expect((await deliver(await stripe.expireEvent(p.id))).status).toBe(200);
    expect((await status(p.id)).status).toBe('expired');
    const before = await balance();
    await deliver(await stripe.pay(p.id));
    expect((await status(p.id)).status).toBe('paid');
    expect(await balance()).toBe(before + 12_000_000n);
  });

  test('a lost notification is reconciled by polling past the grace period (query-order)', async () => {
    const p = await create(7);
    await stripe.pay(p.id); // paid at Stripe; the event is never delivered
    expect((await status(p.id)).status).toBe('pending'); // within the grace period: not asked
    clock.advance(11_000);
    const before = await balance();
    expect(await status(p.id)).toMatchObject({ status: 'paid' });
    expect(await balance()).toBe(before + 7_000_000n);
  });

  test('a paid amount that differs from the order is recorded and not credited', async () => {
    const p = await create(40);
    const before = await balance();
    expect((await deliver(await stripe.pay(p.id, 400))).status).toBe(200);
    expect((await status(p.id)).status).toBe('pending');
    expect(await balance()).toBe(before);
  });

  test('expiry closes the Checkout Session at Stripe (on read and by the sweeper)', async () => {
    const a = await create(5);
    const b = await create(6);
    clock.advance(30 * 60_000);
    expect((await status(a.id)).status).toBe('expired');
    expect(stripe.sessionFor(a.id).status).toBe('expired');
    await t.services.billing.payments.sweep();
    expect(stripe.sessionFor(b.id).status).toBe('expired');
    expect((await status(b.id)).status).toBe('expired');
  });

  test('20 payments paid concurrently give an exact balance', async () => {
    const payer = await makeUser(t);
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        t.request('POST', '/api/billing/payments', { token: payer.token, body: { provider: 'card', amount: (100 + i) / 100, currency: 'USD' } }),
      ),
    );
    expect(created.map((c) => c.status)).toEqual(Array(20).fill(201));
    const events = await Promise.all(created.map((c) => stripe.pay(c.body.id)));
    // Each event delivered twice, all at once.
    const results = await Promise.all([...events, ...events].map(deliver));
    expect(results.every((r) => r.status === 200)).toBe(true);
    const expected = created.reduce((sum, _c, i) => sum + 1_000_000n + BigInt(i) * 10_000n, 0n);
    expect(await t.services.billing.getBalanceMicros(payer.id)).toBe(expected);
    expect(await ledgerSumMicros(t.ctx, payer.id)).toBe(expected);
  });
});

describe('process killed after Stripe says paid, before the notification is handled (postgres)', () => {
  test('a fresh instance on the same database reconciles the payment through query-order', async () => {
    const stripe = startFakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET });
    const env = { SITE: 'intl', PAYMENT_MODE: 'live', STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_URL: stripe.url };
    const first = await createTestApp('postgres', env);
    const user = await makeUser(first);
    const { body: p } = await first.request('POST', '/api/billing/payments', { token: user.token, body: { provider: 'card', amount: 33, currency: 'USD' } });
    await stripe.pay(p.id); // Stripe has the money; our process dies before its webhook is handled
    const restarted = await createTestContext('postgres', env, { testDb: first.testDb, clock: { now: () => new Date(Date.now() + 60_000) } });
    const { app } = await buildApp(restarted.ctx);
    try {
      const res = await app.handle(new Request(`http://localhost/api/billing/payments/${p.id}`, { headers: { authorization: `Bearer ${user.token}` } }));
      expect(await res.json()).toMatchObject({ id: p.id, status: 'paid' });
      const wallet = await app.handle(new Request('http://localhost/api/billing/wallet', { headers: { authorization: `Bearer ${user.token}` } }));
      expect(((await wallet.json()) as { balance: number }).balance).toBe(33);
    } finally {
      await restarted.close();
      await first.close();
      stripe.stop();
    }
  });
});

/**
 * Deliveries to a real receiver (Bun.serve) that checks every Cpd-Signature itself: the events of
 * real money moves, the backoff schedule on 500s and timeouts, the endpoint disabled after the
 * 3-day window (on the test clock), manual retry, the DNS check again at delivery time, and
 * key.spend_limit_reached through the gateway. The worker is stepped (deliverDue) on the test clock.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { backoffDelay, createWebhooksService, RETRY_WINDOW_MS } from '../../../src/modules/webhooks';
import { createTestApp, createTestContext, type TestApp } from '../../support/app';
import { manualClock } from '../../support/clock';
import { DB_KINDS } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { makeUser } from '../../support/make';
import { waitFor } from '../../support/wait';
import { type Receiver, startReceiver } from '../../support/webhook-receiver';

const BASE_MS = 1_000;
const TIMEOUT_MS = 300;

for (const kind of DB_KINDS)
  describe(`webhook deliveries (${kind})`, () => {
    const clock = manualClock();
    const told: Array<[string, string]> = [];
    let t: TestApp;
    let up: FakeUpstream;
    let rx: Receiver;
    let user: Awaited<ReturnType<typeof makeUser>>;
    let endpoint: { id: string; secret: string; url: string };
    const api = (method: string, path: string, body?: unknown, token = user.token) => t.request(method, path, { token, body });
    const deliveriesOf = async (id = endpoint.id) => (await api('GET', `/api/webhooks/${id}/deliveries`)).body.deliveries as any[];

    /** A sandbox top-up paid at the sandbox checkout; answers the payment id. */
    async function topUp(amount = 5): Promise<string> {
      const created = await api('POST', '/api/billing/payments', { provider: 'card', amount, currency: 'USD' });
      expect(created.status).toBe(201);
      expect((await t.request('POST', `/api/payments/sandbox/${created.body.id}/pay`)).status).toBe(303);
      return created.body.id;
    }

    beforeAll(async () => {
      up = await startFakeUpstream({ models: ['pr'] });
      t = await createTestApp(
        kind,
        { WEBHOOK_ALLOW_PRIVATE: 'true', MODEL_BACKENDS: `pr=${up.url}`, RATE_LIMITS: 'gateway=100000/1s' },
        {
          clock,
          build: {
            webhooks: {
              manual: true,
              backoffBaseMs: BASE_MS,
              timeoutMs: TIMEOUT_MS,
              onEndpointDisabled: (userId, url) => void told.push([userId, url]),
            },
          },
        },
      );
      rx = startReceiver();
    });
    afterAll(async () => {
      await rx.close();
      await up.close();
      await t.close();
    });
    beforeEach(async () => {
      rx.mode = 'ok';
      rx.received.length = 0;
      user = await makeUser(t);
      const created = await api('POST', '/api/webhooks', {
        url: rx.url,
        events: ['payment.paid', 'payment.refunded', 'invoice.issued', 'balance.low', 'key.spend_limit_reached'],
      });
      expect(created.status).toBe(201);
      endpoint = created.body;
      rx.secret = endpoint.secret;
    });

    test('a sandbox top-up is delivered as payment.paid with a valid Cpd-Signature, once', async () => {
      const paymentId = await topUp(5);
      expect(await t.services.webhooks.deliverDue()).toBe(1);
      expect(await t.services.webhooks.deliverDue()).toBe(0);
      expect(rx.received).toHaveLength(1);
      const got = rx.received[0]!;
      expect(got.valid).toBe(true);
      expect(got.headers.get('cpd-signature')).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(got.t).toBe(Math.floor(clock.now().getTime() / 1000));
      expect(got.headers.get('content-type')).toBe('application/json');
      expect(got.headers.get('cpd-event-id')).toBe(got.body.id);
      expect(Object.keys(got.body).sort()).toEqual(['created_at', 'data', 'id', 'type']);
      expect(got.body).toMatchObject({
        type: 'payment.paid',
        data: { payment_id: paymentId, provider: 'card', amount: 5, currency: 'USD' },
      });
      expect(got.body.id).toMatch(/^evt_/);
      expect(new Date(got.body.created_at).toISOString()).toBe(got.body.created_at);
      // No credential of any kind travels in a payload.
      expect(JSON.stringify(got.body)).not.toContain(user.token);
      expect(JSON.stringify(got.body)).not.toContain(endpoint.secret);
      const [d] = await deliveriesOf();
      expect(d).toMatchObject({
        event_id: got.body.id,
        event_type: 'payment.paid',
        status: 'delivered',
        attempts: 1,
        last_status_code: 200,
        last_error: null,
        next_attempt_at: null,
      });
      expect(d.log).toHaveLength(1);
      expect(d.log[0]).toMatchObject({ status_code: 200, error: null });
      // A wrong secret does not verify (the receiver's check is real).
      rx.secret = 'whsec_wrong';
      await t.services.webhooks.emitBalanceLow(user.id, { balance: 0.5, threshold: 1 });
      await t.services.webhooks.deliverDue();
      expect(rx.received[1]!.valid).toBe(false);
    });

    test('an endpoint gets only the events it takes, and none while disabled', async () => {
      const other = (await api('POST', '/api/webhooks', { url: `${rx.url}?other`, events: ['invoice.issued'] })).body;
      const off = (await api('POST', '/api/webhooks', { url: `${rx.url}?off`, events: ['payment.paid'] })).body;
      await api('PATCH', `/api/webhooks/${off.id}`, { enabled: false });
      await topUp(2);
      await t.services.webhooks.deliverDue();
      expect(rx.received.map((r) => r.type)).toEqual(['payment.paid']);
      expect(await deliveriesOf(other.id)).toEqual([]);
      expect(await deliveriesOf(off.id)).toEqual([]);
    });

    test('500s and a timeout are retried on the backoff schedule, every attempt logged', async () => {
      rx.mode = 'fail';
      await topUp(3);
      expect(await t.services.webhooks.deliverDue()).toBe(1);
      let [d] = await deliveriesOf();
      expect(d).toMatchObject({ status: 'pending', attempts: 1, last_status_code: 500, last_error: 'HTTP 500' });
      expect(Date.parse(d.next_attempt_at) - clock.now().getTime()).toBe(BASE_MS);
      clock.advance(BASE_MS - 1);
      expect(await t.services.webhooks.deliverDue()).toBe(0);
      clock.advance(1);
      expect(await t.services.webhooks.deliverDue()).toBe(1);
      [d] = await deliveriesOf();
      expect(Date.parse(d.next_attempt_at) - clock.now().getTime()).toBe(2 * BASE_MS);
      rx.mode = 'hang';
      clock.advance(2 * BASE_MS);
      expect(await t.services.webhooks.deliverDue()).toBe(1);
      [d] = await deliveriesOf();
      expect(d).toMatchObject({ status: 'pending', attempts: 3, last_status_code: null, last_error: 'no answer within 0.3 s' });
      expect(d.last_duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
      rx.mode = 'ok';
      clock.advance(4 * BASE_MS);
      expect(await t.services.webhooks.deliverDue()).toBe(1);
      [d] = await deliveriesOf();
      expect(d).toMatchObject({ status: 'delivered', attempts: 4, last_status_code: 200 });
      expect(d.log.map((a: any) => a.status_code)).toEqual([500, 500, null, 200]);
      expect(rx.received.every((r) => r.valid)).toBe(true);
      expect([...rx.countsByEvent().values()]).toEqual([4]);
    });

    test('the backoff doubles from its base up to 6 hours', () => {
      expect([1, 2, 3, 4, 5].map((n) => backoffDelay(n, 10_000))).toEqual([10_000, 20_000, 40_000, 80_000, 160_000]);
      expect(backoffDelay(30, 10_000)).toBe(6 * 3600_000);
    });

    test('failing for the whole 3-day window: the delivery fails, the endpoint is disabled and its owner told; retry works once enabled', async () => {
      rx.mode = 'fail';
      told.length = 0;
      await topUp(4);
      const started = clock.now().getTime();
      let attempts = 0;
      for (;;) {
        attempts += await t.services.webhooks.deliverDue();
        const [row] = await t.ctx.database.query<{ status: string; next: number }>(
          sql`select status, (extract(epoch from next_attempt_at) * 1000)::float8 as next from webhook_deliveries where endpoint_id = ${endpoint.id}`,
        );
        if (row!.status !== 'pending') break;
        clock.advance(Math.max(0, Number(row!.next) - clock.now().getTime()));
      }
      // Every attempt the schedule allows inside the window, and no more.
      let expected = 1;
      for (let at = started + backoffDelay(1, BASE_MS); at <= started + RETRY_WINDOW_MS; at += backoffDelay(++expected, BASE_MS));
      expect(attempts).toBe(expected);
      expect(rx.received).toHaveLength(expected);
      expect(told).toEqual([[user.id, endpoint.url]]);
      user.token = (await t.services.accounts.createSession(user.id)).token; // the old session ended with the 3 days
      expect((await api('GET', `/api/webhooks/${endpoint.id}`)).body).toMatchObject({
        enabled: false,
        disabled_reason: 'deliveries failed for 3 days',
      });
      const [failed] = await deliveriesOf();
      expect(failed).toMatchObject({ status: 'failed', attempts: expected, next_attempt_at: null });
      expect(failed.log).toHaveLength(expected);

      // Disabled: no new deliveries, and no retry until it is enabled again.
      await t.services.webhooks.emitBalanceLow(user.id, { balance: 0.1, threshold: 1 });
      expect(await deliveriesOf()).toHaveLength(1);
      const refused = await api('POST', `/api/webhooks/${endpoint.id}/deliveries/${failed.id}/retry`);
      expect(refused.status).toBe(409);
      expect((await api('PATCH', `/api/webhooks/${endpoint.id}`, { enabled: true })).body).toMatchObject({
        enabled: true,
        disabled_reason: null,
      });
      rx.mode = 'ok';
      const retried = await api('POST', `/api/webhooks/${endpoint.id}/deliveries/${failed.id}/retry`);
      expect(retried.status).toBe(202);
      expect(retried.body).toMatchObject({ id: failed.id, status: 'pending' });
      expect(await t.services.webhooks.deliverDue()).toBe(1);
      expect((await deliveriesOf())[0]).toMatchObject({ id: failed.id, status: 'delivered', attempts: expected + 1 });
      expect(told).toHaveLength(1);
    });

    test('refunds, invoices and balance.low are recorded with their money move; a refused refund records nothing', async () => {
      const paymentId = await topUp(5);
      await t.services.billing.refunds.refund(paymentId, { amount: 2, reason: 'partly' });
      await t.services.billing.invoices.createInvoice(user.id, { payment_id: paymentId, title: 'ACME' });
      await t.services.webhooks.emitBalanceLow(user.id, { balance: 0.4, threshold: 1 });
      // Below zero without allow_negative: 409, rolled back, no event.
      await t.services.billing.credit(t.ctx.database.db, {
        userId: user.id,
        type: 'adjustment',
        amountMicros: -2_500_000n,
        reference: `spend-${user.id}`,
        description: 'spent',
      });
      await expect(t.services.billing.refunds.refund(paymentId, { reason: 'the rest' })).rejects.toThrow('below zero');
      expect(await t.services.webhooks.deliverDue()).toBe(4);
      const byType = Object.fromEntries(rx.received.map((r) => [r.type, r.body.data]));
      expect(Object.keys(byType).sort()).toEqual(['balance.low', 'invoice.issued', 'payment.paid', 'payment.refunded']);
      expect(byType['payment.refunded']).toMatchObject({
        payment_id: paymentId,
        kind: 'refund',
        amount: 2,
        currency: 'USD',
        refunded_amount: 2,
      });
      expect(byType['invoice.issued']).toMatchObject({ payment_id: paymentId, amount: 5, currency: 'USD' });
      expect(byType['balance.low']).toEqual({ balance: 0.4, threshold: 1, currency: 'USD' });
      expect(rx.received.every((r) => r.valid)).toBe(true);
    });

    test('key.spend_limit_reached: once per key and period, however many requests are refused', async () => {
      await t.services.pricing.setModelPrices([{ slug: 'pr', unit: 'per_request', price: 0.1 }]);
      await t.services.billing.credit(t.ctx.database.db, {
        userId: user.id,
        type: 'adjustment',
        amountMicros: 10_000_000n,
        reference: `funds-${user.id}`,
        description: 'funds',
      });
      const key = await t.services.accounts.createApiKey(user.id, { name: 'limited', spend_limit: 0.2, spend_period: 'day' });
      const chat = () =>
        t.request('POST', '/v1/chat/completions', { token: key.key, body: { model: 'pr', messages: [{ role: 'user', content: 'hi' }] } });
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        statuses.push((await chat()).status);
        await t.services.router.flushUsage();
      }
      expect(statuses.slice(0, 2)).toEqual([200, 200]);
      expect(statuses.slice(-3)).toEqual([402, 402, 402]);
      const events = () =>
        t.ctx.database.query<{ data: any }>(
          sql`select data from webhook_events where user_id = ${user.id} and type = 'key.spend_limit_reached'`,
        );
      const [event] = await waitFor(events, 'key.spend_limit_reached recorded', { until: (rows) => rows.length > 0 });
      expect(event!.data).toMatchObject({ key_id: key.id, spend_limit: 0.2, spend_period: 'day' });
      await t.services.webhooks.deliverDue();
      expect(rx.received.filter((r) => r.type === 'key.spend_limit_reached')).toHaveLength(1);
      expect(JSON.stringify(rx.received)).not.toContain(key.key);
      expect(await events()).toHaveLength(1);
    });

    test('the address is checked again at delivery time: a worker that may not reach private addresses refuses to send', async () => {
      const strict = await createTestContext(kind, {}, { testDb: t.testDb, clock });
      try {
        const worker = createWebhooksService(strict.ctx, { backoffBaseMs: BASE_MS, timeoutMs: TIMEOUT_MS });
        await t.services.webhooks.emitBalanceLow(user.id, { balance: 0, threshold: 1 });
        expect(await worker.deliverDue()).toBe(1);
        expect(rx.received).toHaveLength(0);
        const [d] = await deliveriesOf();
        expect(d).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null });
        expect(d.last_error).toContain('loopback, private or link-local');
      } finally {
        await strict.close();
      }
    });
  });

/**
 * Where webhooks meet the accounts' mail, wired in app.ts: a wallet crossing below the owner's
 * low-balance threshold is both a mail and a balance.low event, and an endpoint disabled after its
 * 3-day window is mailed to its owner. Real SMTP (smtp-server) and a receiver checking signatures.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { manualClock } from '../../support/clock';
import { makeUser } from '../../support/make';
import { type SmtpServer, startSmtp } from '../../support/smtp';
import { waitFor } from '../../support/wait';
import { type Receiver, startReceiver } from '../../support/webhook-receiver';

describe('webhooks and mail', () => {
  const clock = manualClock();
  let t: TestApp;
  let smtp: SmtpServer;
  let rx: Receiver;

  beforeAll(async () => {
    smtp = await startSmtp();
    rx = startReceiver();
    t = await createTestApp('postgres', { SMTP_URL: smtp.url, WEBHOOK_ALLOW_PRIVATE: 'true' }, { clock, build: { webhooks: { manual: true, backoffBaseMs: 1_000, timeoutMs: 300 } } });
  });
  afterAll(async () => {
    await t.close();
    await rx.close();
    await smtp.close();
  });

  async function endpointFor(user: { token: string }, events: string[]) {
    const created = await t.request('POST', '/api/webhooks', { token: user.token, body: { url: rx.url, events } });
    expect(created.status).toBe(201);
    rx.secret = created.body.secret;
    return created.body as { id: string; url: string };
  }

  test('a crossing below the low-balance threshold is one mail and one signed balance.low event', async () => {
    const u = await makeUser(t, { email: 'lean@hooks.example' });
    await endpointFor(u, ['balance.low']);
    expect((await t.request('PUT', '/api/auth/notifications', { token: u.token, body: { low_balance: 5 } })).status).toBe(200);
    const { db } = t.ctx.database;
    await t.services.billing.credit(db, { userId: u.id, type: 'adjustment', amountMicros: 10_000_000n, reference: `credit-${u.id}`, description: 'test' });
    await t.services.billing.debitUsage(db, { userId: u.id, amountMicros: 7_500_000n, reference: `usage-${u.id}`, description: 'test' });

    const mail = await smtp.next((m) => m.to === 'lean@hooks.example' && m.subject.startsWith('Your balance is low'), 'the low-balance mail');
    expect(mail.subject).toBe('Your balance is low: $2.50');
    rx.received.length = 0;
    await waitFor(() => t.services.webhooks.deliverDue(), 'the balance.low delivery', { until: (n) => n > 0 });
    const [event] = rx.received;
    expect(event!.valid).toBe(true);
    expect(event!.body).toMatchObject({ type: 'balance.low', data: { balance: 2.5, threshold: 5, currency: 'USD' } });
  });

  test('an endpoint disabled after 3 days of failures is mailed to its owner, naming only its origin', async () => {
    const u = await makeUser(t, { email: 'hooked@hooks.example' });
    const endpoint = await endpointFor(u, ['payment.paid']);
    rx.mode = 'fail';
    const created = await t.request('POST', '/api/billing/payments', { token: u.token, body: { provider: 'card', amount: 3, currency: 'USD' } });
    expect((await t.request('POST', `/api/payments/sandbox/${created.body.id}/pay`)).status).toBe(303);
    for (;;) {
      await t.services.webhooks.deliverDue();
      const [row] = await t.ctx.database.query<{ status: string; next: number }>(
        sql`select status, (extract(epoch from next_attempt_at) * 1000)::float8 as next from webhook_deliveries where endpoint_id = ${endpoint.id}`,
      );
      if (row!.status !== 'pending') break;
      clock.advance(Math.max(0, Number(row!.next) - clock.now().getTime()));
    }
    const mail = await smtp.next((m) => m.to === 'hooked@hooks.example' && m.subject.startsWith('Webhook endpoint disabled'), 'the disabled-endpoint mail');
    expect(mail.subject).toBe(`Webhook endpoint disabled: ${new URL(endpoint.url).origin}`);
    expect(mail.text).toContain('/console/webhooks');
    rx.mode = 'ok';
  });
});

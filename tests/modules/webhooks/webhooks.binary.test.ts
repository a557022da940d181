/**
 * Webhooks in the compiled binary (dist/cpd, WEBHOOK_ALLOW_PRIVATE=true for a receiver on
 * 127.0.0.1): a sandbox top-up reaches the receiver as payment.paid with a valid signature; and
 * an event whose receiver was failing when cpd was killed with SIGKILL is still delivered after
 * a restart (the delivery is a row, not a timer in the dead process).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createAccountsService } from '../../../src/modules/accounts';
import { createTestContext, type TestContext } from '../../support/app';
import { type RunningBinary, startBinary } from '../../support/binary';
import { waitFor } from '../../support/wait';
import { type Receiver, startReceiver } from '../../support/webhook-receiver';

describe('webhooks in the compiled binary (postgres)', () => {
  let tc: TestContext;
  let rx: Receiver;
  let token: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    tc = await createTestContext('postgres');
    const accounts = createAccountsService(tc.ctx);
    const user = await accounts.createUser({ email: 'hooks@example.com', password: 'long enough password' });
    token = (await accounts.createSession(user.id)).token;
    env = { DATABASE_URL: tc.testDb.url!, WEBHOOK_ALLOW_PRIVATE: 'true', SECRET_KEY: 'binary-webhooks-secret-0123456789abcdef' };
    rx = startReceiver();
  }, 120_000);
  afterAll(async () => {
    await rx.close();
    await tc.close();
  });

  const call = (cpd: RunningBinary, method: string, path: string, body?: unknown) =>
    fetch(`${cpd.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'manual',
    });

  async function topUp(cpd: RunningBinary, amount: number): Promise<string> {
    const created = await call(cpd, 'POST', '/api/billing/payments', { provider: 'card', amount, currency: 'USD' });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    expect((await call(cpd, 'POST', `/api/payments/sandbox/${id}/pay`)).status).toBe(303);
    return id;
  }

  test('a sandbox top-up is delivered as payment.paid; a failing receiver still gets it after kill -9 and a restart', async () => {
    let cpd = await startBinary({ env });
    try {
      const created = await call(cpd, 'POST', '/api/webhooks', { url: rx.url, events: ['payment.paid'] });
      expect(created.status).toBe(201);
      rx.secret = ((await created.json()) as { secret: string }).secret;

      const first = await topUp(cpd, 7);
      const got = await waitFor(() => rx.received.find((r) => r.body?.data?.payment_id === first), 'payment.paid at the receiver');
      expect(got).toMatchObject({ valid: true, type: 'payment.paid', body: { data: { payment_id: first, amount: 7, currency: 'USD' } } });

      rx.mode = 'fail';
      const second = await topUp(cpd, 8);
      await waitFor(() => rx.received.find((r) => r.body?.data?.payment_id === second && r.answered === 500), 'a failed attempt');
      expect(await cpd.stop('SIGKILL')).not.toBe(0);

      rx.mode = 'ok';
      cpd = await startBinary({ env });
      // The next attempt comes on the schedule (10 s after the failed one), from the new process.
      await waitFor(
        () => rx.received.find((r) => r.body?.data?.payment_id === second && r.answered === 200),
        'payment.paid delivered after the restart',
        { timeoutMs: 40_000 },
      );
      const forSecond = rx.received.filter((r) => r.body?.data?.payment_id === second);
      expect(forSecond.length).toBeGreaterThanOrEqual(2);
      expect(forSecond.every((r) => r.valid)).toBe(true);
      // Deduplicated by event id, as a receiver does: each event exactly once.
      const accepted = new Set(rx.received.filter((r) => r.answered === 200).map((r) => r.eventId));
      expect(accepted.size).toBe(2);
      expect(new Set(forSecond.map((r) => r.eventId)).size).toBe(1);
    } finally {
      await cpd.stop();
    }
  }, 120_000);
});

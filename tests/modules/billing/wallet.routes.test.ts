import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createBillingService } from '../../../src/modules/billing';
import { createTestApp, createTestContext, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { manualClock } from '../../support/clock';
import { waitFor } from '../../support/wait';

for (const kind of DB_KINDS) {
  describe(`wallet and transactions (${kind})`, () => {
    const clock = manualClock();
    let t: TestApp;
    let user: Awaited<ReturnType<typeof makeUser>>;
    beforeAll(async () => {
      t = await createTestApp(kind, { SITE: 'cn' }, { clock });
      user = await makeUser(t);
    });
    afterAll(() => t.close());

    const debit = (n: number) => {
      clock.advance(1);
      return t.services.billing.debitUsage(t.ctx.database.db, { userId: user.id, amountMicros: BigInt(n), reference: `w-${n}`, description: `usage ${n}` });
    };
    const ids = (res: { body: any }): string[] => res.body.transactions.map((x: { id: string }) => x.id);

    test('a new account has an empty wallet in the site currency; the endpoints need a session', async () => {
      expect((await t.request('GET', '/api/billing/wallet', { token: user.token })).body).toEqual({ balance: 0, currency: 'CNY', updated_at: null });
      expect((await t.request('GET', '/api/billing/transactions', { token: user.token })).body).toEqual({ transactions: [], next_cursor: null });
      for (const path of ['/api/billing/wallet', '/api/billing/transactions', '/api/billing/summary'])
        expect((await t.request('GET', path)).status).toBe(401);
    });

    test('transactions: newest first, signed amounts in major units, cursor pages stable while rows are inserted', async () => {
      const made: string[] = [];
      for (let i = 1; i <= 5; i++) made.push((await debit(i * 10_000)).transactionId);
      const first = await t.request('GET', '/api/billing/transactions?limit=2', { token: user.token });
      expect(ids(first)).toEqual(made.slice(3).reverse());
      expect(first.body.transactions[0]).toEqual({
        id: made[4],
        type: 'usage',
        amount: -0.05,
        currency: 'CNY',
        created_at: expect.any(String),
        description: 'usage 50000',
      });
      // New rows arrive between pages: they are newer than the cursor and never shift it.
      await Promise.all([debit(60_000), debit(70_000), debit(80_000)]);
      const second = await t.request('GET', `/api/billing/transactions?limit=2&cursor=${first.body.next_cursor}`, { token: user.token });
      expect(ids(second)).toEqual(made.slice(1, 3).reverse());
      const third = await t.request('GET', `/api/billing/transactions?limit=2&cursor=${second.body.next_cursor}`, { token: user.token });
      expect(ids(third)).toEqual(made.slice(0, 1));
      expect(third.body.next_cursor).toBeNull();
      const wallet = await t.request('GET', '/api/billing/wallet', { token: user.token });
      expect(wallet.body.balance).toBe(-0.36);
      expect((await t.request('GET', '/api/billing/transactions', { token: user.token })).body.transactions).toHaveLength(8);
    });

    test('limit outside 1..200 and a cursor that does not decode are 400', async () => {
      for (const q of ['limit=0', 'limit=201', 'limit=abc', 'limit=1.5', 'cursor=%%%', 'cursor=eyJhIjoxfQ'])
        expect((await t.request('GET', `/api/billing/transactions?${q}`, { token: user.token })).status).toBe(400);
      expect((await t.request('GET', '/api/billing/transactions?limit=200', { token: user.token })).status).toBe(200);
    });
  });
}

describe('payment sweeper (postgres)', () => {
  test('expires due payments on its own interval and stops at shutdown', async () => {
    const clock = manualClock();
    const tc = await createTestContext('postgres', {}, { clock });
    try {
      const billing = createBillingService(tc.ctx);
      const p = await billing.payments.create('sweep-user', { provider: 'card', amount: 5, currency: 'USD' });
      billing.startSweeper(10);
      clock.advance(30 * 60_000);
      await waitFor(async () => (await billing.payments.requireOwn('sweep-user', p.id)).status === 'expired');
    } finally {
      await tc.close();
    }
  });
});

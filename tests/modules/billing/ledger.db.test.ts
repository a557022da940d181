import { describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createBillingService } from '../../../src/modules/billing';
import { DB_KINDS } from '../../support/db';
import { billingFixture, ledgerSumMicros } from './support';
import { waitFor } from '../../support/wait';

for (const kind of DB_KINDS) {
  describe(`ledger (${kind})`, () => {
    const fixture = billingFixture(kind);

    test('a debit creates the wallet, may go below zero, and is idempotent on its reference', async () => {
      const first = await fixture.billing.debitUsage(fixture.tc.ctx.database.db, { userId: 'u1', amountMicros: 1_500n, reference: 'req-1', description: 'chat' });
      expect(first.balanceMicros).toBe(-1_500n);
      const replay = await fixture.billing.debitUsage(fixture.tc.ctx.database.db, { userId: 'u1', amountMicros: 1_500n, reference: 'req-1', description: 'chat' });
      expect(replay).toEqual(first);
      expect(await fixture.billing.getBalanceMicros('u1')).toBe(-1_500n);
      expect(await ledgerSumMicros(fixture.tc.ctx, 'u1')).toBe(-1_500n);
    });

    test("a debit joins the caller's transaction and rolls back with it", async () => {
      await fixture.billing.credit(fixture.tc.ctx.database.db, { userId: 'u2', type: 'topup', amountMicros: 10_000_000n, reference: 'top-u2', description: 'top-up' });
      await expect(
        fixture.tc.ctx.database.db.transaction(async (tx) => {
          await fixture.billing.debitUsage(tx, { userId: 'u2', amountMicros: 2_000_000n, reference: 'req-rollback', description: 'chat' });
          // PGlite has one connection: a read outside the open transaction would wait for it.
          if (kind === 'postgres') expect(await fixture.billing.getBalanceMicros('u2')).toBe(10_000_000n);
          throw new Error('caller fails after the debit');
        }),
      ).rejects.toThrow('caller fails');
      expect(await fixture.billing.getBalanceMicros('u2')).toBe(10_000_000n);
      expect(await ledgerSumMicros(fixture.tc.ctx, 'u2')).toBe(10_000_000n);
    });

    test('reusing a reference for a different entry is a conflict, not a silent replay', async () => {
      const { db } = fixture.tc.ctx.database;
      await fixture.billing.debitUsage(db, { userId: 'u3-first', amountMicros: 1n, reference: 'req-taken', description: 'x' });
      await expect(
        fixture.billing.debitUsage(db, { userId: 'u3', amountMicros: 1n, reference: 'req-taken', description: 'x' }),
      ).rejects.toMatchObject({ kind: 'conflict' });
      expect(await fixture.billing.getBalanceMicros('u3')).toBe(0n);
    });

    test('a top-up must be positive', async () => {
      await expect(
        fixture.billing.credit(fixture.tc.ctx.database.db, { userId: 'u3', type: 'topup', amountMicros: 0n, reference: 'zero', description: 'x' }),
      ).rejects.toMatchObject({ kind: 'invalid' });
    });

    test('onBalanceChange fires for changes made by another service instance: debits alone, in a transaction, credits', async () => {
      const seen: string[] = [];
      await fixture.billing.onBalanceChange((userId) => seen.push(userId));
      const other = createBillingService(fixture.tc.ctx);
      const { db } = fixture.tc.ctx.database;
      await other.debitUsage(db, { userId: 'u-alone', amountMicros: 1n, reference: 'req-alone', description: 'x' });
      await db.transaction((tx) => other.debitUsage(tx, { userId: 'u-in-tx', amountMicros: 1n, reference: 'req-in-tx', description: 'x' }));
      await other.credit(db, { userId: 'u-credit', type: 'adjustment', amountMicros: 5n, reference: 'adj-notify', description: 'x' });
      await waitFor(() => ['u-alone', 'u-in-tx', 'u-credit'].every((u) => seen.includes(u)));
    });
  });
}

describe('ledger under concurrency (postgres)', () => {
  const fixture = billingFixture('postgres');

  test('50 concurrent writers (with replays) keep balance == sum(transactions)', async () => {
    const users = ['c1', 'c2', 'c3'];
    const writes = Array.from({ length: 50 }, (_, i) => {
      const k = i % 40; // i >= 40 replays an earlier reference
      const userId = users[k % users.length]!;
      const amount = BigInt(k * 1000 + 7);
      return k < 20
        ? fixture.billing.credit(fixture.tc.ctx.database.db, { userId, type: 'adjustment', amountMicros: amount, reference: `conc-${k}`, description: 'adj' })
        : fixture.tc.ctx.database.db.transaction((tx) => fixture.billing.debitUsage(tx, { userId, amountMicros: amount, reference: `conc-${k}`, description: 'use' }));
    });
    await Promise.all(writes);
    for (const u of users) expect(await fixture.billing.getBalanceMicros(u)).toBe(await ledgerSumMicros(fixture.tc.ctx, u));
    const [count] = await fixture.tc.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from wallet_transactions`);
    expect(count!.n).toBe(40);
    let expected = 0n;
    for (let k = 0; k < 40; k++) expected += (k < 20 ? 1n : -1n) * BigInt(k * 1000 + 7);
    let total = 0n;
    for (const u of users) total += await fixture.billing.getBalanceMicros(u);
    expect(total).toBe(expected);
  });

  test('adjustments sent twice with one Idempotency-Key beside the top-up that creates the wallet: one entry each, never a deadlock', async () => {
    // Before, an adjustment on a wallet not yet created took no lock; a twin that locked the row
    // the top-up had just created then waited for the first's entry while the first waited for
    // the row: PostgreSQL aborted one of them in about one round in twenty.
    const db = fixture.tc.ctx.database.db;
    for (let round = 0; round < 100; round++) {
      const userId = `twins-${round}`;
      const adjust = () => db.transaction((tx) => fixture.billing.adjust(tx, { userId, amount: -1, reason: 'correction', allowNegative: true, idempotencyKey: 'k' }));
      const topup = () => fixture.billing.credit(db, { userId, type: 'topup', amountMicros: 5_000_000n, reference: `twins-top-${round}`, description: 'top-up' });
      const outcomes = await Promise.allSettled([adjust(), topup(), adjust(), adjust()]);
      expect(outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason))).toEqual([]);
      const adjusted = outcomes.filter((o, i) => i !== 1 && o.status === 'fulfilled').map((o) => (o as PromiseFulfilledResult<{ applied: boolean }>).value.applied);
      expect(adjusted.filter(Boolean)).toHaveLength(1);
      expect(await fixture.billing.getBalanceMicros(userId)).toBe(4_000_000n);
      expect(await ledgerSumMicros(fixture.tc.ctx, userId)).toBe(4_000_000n);
    }
  });
});

/** fixture.billing.debitUsageMany: one `usage` entry per element, written as one statement. */
import { describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createBillingService } from '../../../src/modules/billing';
import { sqlState, UNIQUE_VIOLATION } from '../../../src/platform/db';
import { DB_KINDS } from '../../support/db';
import { billingFixture, ledgerSumMicros } from './support';
import { waitFor } from '../../support/wait';

const entry = (userId: string, amountMicros: bigint, reference: string) => ({ userId, amountMicros, reference, description: `use ${reference}` });

for (const kind of DB_KINDS) {
  describe(`debitUsageMany (${kind})`, () => {
    const fixture = billingFixture(kind);
    const entriesOf = (userId: string) =>
      fixture.tc.ctx.database.query<{ type: string; amount: string; reference: string; description: string }>(
        sql`select type, amount_micros::text as amount, reference, description from wallet_transactions where user_id = ${userId} order by reference`,
      );

    test('one entry per element over several users; each balance == sum(transactions), missing wallets created', async () => {
      await fixture.billing.credit(fixture.tc.ctx.database.db, { userId: 'm-a', type: 'topup', amountMicros: 1_000n, reference: 'top-m-a', description: 'top-up' });
      const balances = await fixture.billing.debitUsageMany(fixture.tc.ctx.database.db, [
        entry('m-b', 5n, 'm-1'),
        entry('m-a', 100n, 'm-2'),
        entry('m-b', 7n, 'm-3'),
        entry('m-a', 1_200n, 'm-4'),
      ]);
      expect(balances).toEqual(new Map([['m-a', -300n], ['m-b', -12n]]));
      expect(await entriesOf('m-b')).toEqual([
        { type: 'usage', amount: '-5', reference: 'm-1', description: 'use m-1' },
        { type: 'usage', amount: '-7', reference: 'm-3', description: 'use m-3' },
      ]);
      expect((await entriesOf('m-a')).filter((e) => e.type === 'usage').map((e) => e.amount)).toEqual(['-100', '-1200']);
      for (const u of ['m-a', 'm-b']) expect(await fixture.billing.getBalanceMicros(u)).toBe(await ledgerSumMicros(fixture.tc.ctx, u));
    });

    test('a replay inserts nothing and debits nothing; a partial replay debits only the new entries', async () => {
      const first = [entry('r-a', 10n, 'r-1'), entry('r-b', 20n, 'r-2')];
      expect(await fixture.billing.debitUsageMany(fixture.tc.ctx.database.db, first)).toEqual(new Map([['r-a', -10n], ['r-b', -20n]]));
      // Answered from the wallets although nothing moved.
      expect(await fixture.billing.debitUsageMany(fixture.tc.ctx.database.db, first)).toEqual(new Map([['r-a', -10n], ['r-b', -20n]]));
      const again = await fixture.tc.ctx.database.db.transaction((tx) => fixture.billing.debitUsageMany(tx, [...first, entry('r-a', 1n, 'r-3'), entry('r-a', 1n, 'r-3')]));
      expect(again).toEqual(new Map([['r-a', -11n], ['r-b', -20n]]));
      expect((await entriesOf('r-a')).map((e) => e.reference)).toEqual(['r-1', 'r-3']);
      for (const u of ['r-a', 'r-b']) expect(await fixture.billing.getBalanceMicros(u)).toBe(await ledgerSumMicros(fixture.tc.ctx, u));
      expect(await fixture.billing.debitUsageMany(fixture.tc.ctx.database.db, [])).toEqual(new Map());
    });

    test("the usage batch's first try inserts plainly: a reference already written fails it (23505) and changes nothing; the replay debits only the new entry", async () => {
      const { db } = fixture.tc.ctx.database;
      const batch = (entries: ReturnType<typeof entry>[], firstTry: boolean) =>
        db.transaction((tx) => fixture.billing.debitUsageBatch(tx, entries, 'test-holder', { firstTry }));
      await batch([entry('f-a', 4n, 'f-1')], true);
      const entries = [entry('f-a', 4n, 'f-1'), entry('f-a', 6n, 'f-2')];
      const failure = await batch(entries, true).then(() => null, (err: unknown) => err);
      expect(sqlState(failure)).toBe(UNIQUE_VIOLATION);
      expect((await entriesOf('f-a')).map((e) => e.reference)).toEqual(['f-1']);
      expect(await fixture.billing.getBalanceMicros('f-a')).toBe(-4n);
      await batch(entries, false);
      expect((await entriesOf('f-a')).map((e) => e.amount)).toEqual(['-4', '-6']);
      expect(await fixture.billing.getBalanceMicros('f-a')).toBe(await ledgerSumMicros(fixture.tc.ctx, 'f-a'));
      expect(await fixture.billing.getBalanceMicros('f-a')).toBe(-10n);
    });

    test("joins the caller's transaction: a reused reference is a conflict and rolls everything back", async () => {
      await expect(
        fixture.tc.ctx.database.db.transaction((tx) => fixture.billing.debitUsageMany(tx, [entry('x-a', 3n, 'x-new'), entry('x-b', 10n, 'r-1')])),
      ).rejects.toMatchObject({ kind: 'conflict' });
      expect(await entriesOf('x-a')).toEqual([]);
      expect(await fixture.billing.getBalanceMicros('x-a')).toBe(0n);
      await expect(fixture.billing.debitUsageMany(fixture.tc.ctx.database.db, [entry('x-a', -1n, 'x-neg')])).rejects.toMatchObject({ kind: 'invalid' });
    });

    test('every moved wallet is announced, alone and at the commit of a transaction', async () => {
      const seen = new Set<string>();
      await fixture.billing.onBalanceChange((userId) => seen.add(userId));
      const other = createBillingService(fixture.tc.ctx);
      await other.debitUsageMany(fixture.tc.ctx.database.db, [entry('n-a', 1n, 'n-1'), entry('n-b', 1n, 'n-2')]);
      await fixture.tc.ctx.database.db.transaction((tx) => other.debitUsageMany(tx, [entry('n-c', 1n, 'n-3'), entry('n-d', 1n, 'n-4')]));
      await waitFor(() => ['n-a', 'n-b', 'n-c', 'n-d'].every((u) => seen.has(u)));
    });
  });
}

describe('debitUsageMany under concurrency (postgres)', () => {
  const fixture = billingFixture('postgres');

  test('batches over overlapping wallets, in opposite orders, with replays, single debits and credits: no deadlock, balance == sum', async () => {
    const users = ['k1', 'k2', 'k3', 'k4', 'k5'];
    const batch = (b: number) => {
      const list = Array.from({ length: 30 }, (_, i) => entry(users[(b + i) % users.length]!, BigInt(b * 100 + i + 1), `k-${b}-${i}`));
      return b % 2 ? list.reverse() : list;
    };
    const writes: Promise<unknown>[] = [];
    for (let b = 0; b < 20; b++) {
      const entries = batch(b % 15); // batches 15..19 replay 0..4 exactly
      writes.push(fixture.tc.ctx.database.db.transaction((tx) => fixture.billing.debitUsageMany(tx, entries)));
      writes.push(fixture.billing.debitUsage(fixture.tc.ctx.database.db, { userId: users[b % users.length]!, amountMicros: 1n, reference: `k-one-${b}`, description: 'one' }));
      writes.push(fixture.billing.credit(fixture.tc.ctx.database.db, { userId: users[(b + 2) % users.length]!, type: 'adjustment', amountMicros: 50n, reference: `k-adj-${b}`, description: 'adj' }));
    }
    await Promise.all(writes);
    let expected = 0n;
    for (let b = 0; b < 15; b++) for (const e of batch(b)) expected -= e.amountMicros;
    expected += 20n * (50n - 1n);
    let total = 0n;
    for (const u of users) {
      const balance = await fixture.billing.getBalanceMicros(u);
      expect(balance).toBe(await ledgerSumMicros(fixture.tc.ctx, u));
      total += balance;
    }
    expect(total).toBe(expected);
    const [count] = await fixture.tc.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from wallet_transactions where type = 'usage'`);
    expect(count!.n).toBe(15 * 30 + 20);
  });
});

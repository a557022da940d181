import { describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { DB_KINDS } from '../../support/db';
import { billingFixture, ledgerSumMicros } from './support';

/**
 * Any mix of top-ups, usage batches (the router's path), operator adjustments (with and without
 * allow_negative, with idempotency keys) and replays of all of them, run in concurrent batches,
 * keeps every balance equal to the sum of its ledger and to the sum of the entries reported as
 * applied, with each reference recorded once.
 */
type Op =
  | { kind: 'topup'; user: number; micros: number; ref: number }
  | { kind: 'usage'; user: number; micros: number; ref: number }
  | { kind: 'adjust'; user: number; micros: number; ref: number; allowNegative: boolean };

const user = fc.integer({ min: 0, max: 2 });
const micros = fc.integer({ min: 1, max: 5_000_000 });
const ref = fc.integer({ min: 0, max: 9 }); // few references: sequences replay earlier operations
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('topup' as const), user, micros, ref }),
  fc.record({ kind: fc.constant('usage' as const), user, micros, ref }),
  fc.record({ kind: fc.constant('adjust' as const), user, micros: fc.integer({ min: -5_000_000, max: 5_000_000 }).filter((n) => n !== 0), ref, allowNegative: fc.boolean() }),
);

for (const kind of DB_KINDS) {
  describe(`ledger property with operator adjustments (${kind})`, () => {
    const fixture = billingFixture(kind);

    test('balance == sum(ledger) == sum(applied entries) for any mix and replay', async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(fc.array(op, { minLength: 1, maxLength: 10 }), { minLength: 1, maxLength: 4 }), async (batches) => {
          run++;
          const users = [0, 1, 2].map((u) => `ops-${run}-u${u}`);
          const applied = new Map<string, { userId: string; micros: bigint }>();
          for (const batch of batches) {
            const results = await Promise.allSettled(batch.map((o) => apply(o, users, run)));
            for (const [i, r] of results.entries()) {
              if (r.status === 'rejected') {
                // Refusals are the documented ones: a reference reused for another entry, or a debit below zero without allow_negative.
                expect(r.reason).toMatchObject({ kind: 'conflict' });
                continue;
              }
              const o = batch[i]!;
              const previous = applied.get(r.value.id);
              if (previous) expect(previous).toEqual({ userId: users[o.user]!, micros: r.value.micros });
              else applied.set(r.value.id, { userId: users[o.user]!, micros: r.value.micros });
            }
          }
          for (const u of users) {
            const balance = await fixture.billing.getBalanceMicros(u);
            expect(await ledgerSumMicros(fixture.tc.ctx, u)).toBe(balance);
            const reported = [...applied.values()].filter((e) => e.userId === u).reduce((s, e) => s + e.micros, 0n);
            expect(reported).toBe(balance);
          }
          const [dupes] = await fixture.tc.ctx.database.query<{ n: number }>(
            sql`select count(*)::int as n from (select reference from wallet_transactions where user_id like ${`ops-${run}-%`} group by reference having count(*) > 1) d`,
          );
          expect(dupes!.n).toBe(0);
        }),
        { numRuns: kind === 'postgres' ? 25 : 10 },
      );
    });

    /** Applies one operation; answers the ledger entry it produced or replayed (id and signed micro-units). */
    async function apply(o: Op, users: string[], run: number): Promise<{ id: string; micros: bigint }> {
      const userId = users[o.user]!;
      const db = fixture.tc.ctx.database.db;
      const reference = `ops-${run}-${o.kind}-${o.ref}`;
      if (o.kind === 'topup') {
        const r = await fixture.billing.credit(db, { userId, type: 'topup', amountMicros: BigInt(o.micros), reference, description: 'top-up' });
        return { id: r.transactionId, micros: BigInt(o.micros) };
      }
      if (o.kind === 'usage') {
        await fixture.billing.debitUsageMany(db, [{ userId, amountMicros: BigInt(o.micros), reference, description: 'usage' }]);
        const [row] = await fixture.tc.ctx.database.query<{ id: string; amount_micros: string }>(
          sql`select id, amount_micros::text from wallet_transactions where reference = ${reference}`,
        );
        return { id: row!.id, micros: BigInt(row!.amount_micros) };
      }
      const { transaction } = await db.transaction((tx) =>
        fixture.billing.adjust(tx, { userId, amount: o.micros / 1e6, reason: `adjust ${o.ref}`, allowNegative: o.allowNegative, idempotencyKey: String(o.ref) }),
      );
      return { id: transaction.id, micros: BigInt(Math.round(transaction.amount * 1e6)) };
    }
  });
}

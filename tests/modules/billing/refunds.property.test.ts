import { describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { AppError } from '../../../src/platform/errors';
import { DB_KINDS } from '../../support/db';
import { billingFixture, ledgerSumMicros } from './support';

/**
 * Any mix of admin refunds (an amount or the rest, one of a few Idempotency-Keys or none, with and
 * without allow_negative), usage debits, refunds and disputes reported by the provider (replayed,
 * reordered, failing, won, lost), run in concurrent batches over a few paid payments, keeps:
 * every balance equal to the sum of its ledger and to top-ups − usage − what the payments'
 * refunds hold back; each payment's refunded amount equal to its refunds that hold money; one
 * refund per Idempotency-Key and per provider refund id; admin refunds never above the payment.
 */
type Op =
  | { kind: 'refund'; pay: number; micros: number | null; key: number | null; allowNegative: boolean }
  | { kind: 'usage'; user: number; micros: number; ref: number }
  | { kind: 'notice'; pay: number; ref: number; status: 'succeeded' | 'pending' | 'failed' }
  | { kind: 'dispute'; pay: number; ref: number; status: 'open' | 'won' | 'lost' };

const PAID_MICROS = 20_000_000n;
const pay = fc.integer({ min: 0, max: 3 }); // payments 0, 1 of user 0; 2, 3 of user 1
const ref = fc.integer({ min: 0, max: 3 }); // few ids: provider notices replay each other
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('refund' as const),
    pay,
    micros: fc.option(fc.integer({ min: 1, max: 25_000_000 }), { nil: null }),
    key: fc.option(fc.integer({ min: 0, max: 2 }), { nil: null }),
    allowNegative: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('usage' as const), user: fc.integer({ min: 0, max: 1 }), micros: fc.integer({ min: 1, max: 15_000_000 }), ref }),
  fc.record({ kind: fc.constant('notice' as const), pay, ref, status: fc.constantFrom('succeeded' as const, 'pending' as const, 'failed' as const) }),
  fc.record({ kind: fc.constant('dispute' as const), pay, ref, status: fc.constantFrom('open' as const, 'won' as const, 'lost' as const) }),
);

for (const kind of DB_KINDS) {
  describe(`refunds under concurrency, replays and reordering (${kind})`, () => {
    const fixture = billingFixture(kind);

    test('the ledger stays exact and every refund moves money once', async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(fc.array(op, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 4 }), async (batches) => {
          run++;
          const { billing } = fixture;
          const db = fixture.tc.ctx.database.db;
          const users = [0, 1].map((u) => `refunds-${run}-u${u}`);
          const payments: string[] = [];
          for (const userId of [users[0]!, users[0]!, users[1]!, users[1]!]) {
            const created = await billing.payments.create(userId, { provider: 'card', amount: 20, currency: 'USD' });
            await billing.sandbox!.decide(created.id, 'paid');
            payments.push(created.id);
          }
          const apply = async (o: Op): Promise<unknown> => {
            if (o.kind === 'usage')
              return billing.debitUsage(db, { userId: users[o.user]!, amountMicros: BigInt(o.micros), reference: `refunds-${run}-usage-${o.ref}-${o.user}`, description: 'usage' });
            if (o.kind === 'refund')
              return billing.refunds.refund(payments[o.pay]!, {
                amount: o.micros === null ? undefined : o.micros / 1e6,
                reason: 'property',
                allowNegative: o.allowNegative,
                idempotencyKey: o.key === null ? undefined : `key-${o.key}`,
              });
            // A provider's refund or dispute id always names the same amount; its status moves.
            const amountMicros = BigInt(o.ref + 1) * 1_500_000n;
            const providerRefundId = `${o.kind === 'notice' ? 're' : 'dp'}_${run}_${o.pay}_${o.ref}`;
            return billing.refunds.applyReports('card', [
              { paymentId: payments[o.pay]!, kind: o.kind === 'notice' ? 'refund' : 'dispute', providerRefundId, amountMicros, currency: 'USD', status: o.status },
            ]);
          };
          for (const batch of batches) {
            for (const r of await Promise.allSettled(batch.map(apply))) {
              // The documented refusals only: more than remains, nothing left, below zero, a key reused for another body.
              if (r.status === 'rejected') expect(r.reason instanceof AppError && ['conflict', 'invalid'].includes(r.reason.kind) ? 'refused' : r.reason).toBe('refused');
            }
          }

          const rows = await fixture.tc.ctx.database.query<{ payment_id: string; amount: string; refunded: string; held: string; admin_held: string }>(
            sql`select p.id as payment_id, p.amount_micros::text as amount, p.refunded_amount_micros::text as refunded,
                       coalesce(sum(r.amount_micros) filter (where r.status in ('pending', 'succeeded', 'open', 'lost')), 0)::text as held,
                       coalesce(sum(r.amount_micros) filter (where r.status in ('pending', 'succeeded') and r.source = 'admin'), 0)::text as admin_held
                from payments p left join payment_refunds r on r.payment_id = p.id
                where p.user_id like ${`refunds-${run}-%`} group by p.id`,
          );
          for (const r of rows) {
            expect({ id: r.payment_id, refunded: r.refunded }).toEqual({ id: r.payment_id, refunded: r.held });
            expect(BigInt(r.admin_held) <= BigInt(r.amount)).toBe(true);
          }
          for (const [u, userId] of users.entries()) {
            const balance = await billing.getBalanceMicros(userId);
            expect(await ledgerSumMicros(fixture.tc.ctx, userId)).toBe(balance);
            const [usage] = await fixture.tc.ctx.database.query<{ s: string }>(
              sql`select coalesce(-sum(amount_micros), 0)::text as s from wallet_transactions where user_id = ${userId} and type = 'usage'`,
            );
            const refunded = rows.filter((r) => payments.slice(2 * u, 2 * u + 2).includes(r.payment_id)).reduce((s, r) => s + BigInt(r.refunded), 0n);
            expect(balance).toBe(2n * PAID_MICROS - BigInt(usage!.s) - refunded);
          }
          const [dupes] = await fixture.tc.ctx.database.query<{ keys: number; ids: number }>(
            sql`select (select count(*) from (select 1 from payment_refunds where user_id like ${`refunds-${run}-%`} and idempotency_key is not null
                          group by payment_id, idempotency_key having count(*) > 1) k)::int as keys,
                       (select count(*) from (select 1 from payment_refunds where user_id like ${`refunds-${run}-%`} and provider_refund_id is not null
                          group by provider, provider_refund_id having count(*) > 1) i)::int as ids`,
          );
          expect(dupes).toEqual({ keys: 0, ids: 0 });
        }),
        { numRuns: kind === 'postgres' ? 20 : 6 },
      );
    }, 240_000);
  });
}

import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { billingFixture, ledgerSumMicros } from './support';

type Op = { kind: 'debit' | 'credit' | 'adjust'; user: number; amount: bigint; ref: number };

const op = fc.record({
  kind: fc.constantFrom('debit' as const, 'credit' as const, 'adjust' as const),
  user: fc.integer({ min: 0, max: 2 }),
  amount: fc.bigInt({ min: 1n, max: 50_000_000n }),
  // Few distinct references so that sequences contain replays of earlier operations.
  ref: fc.integer({ min: 0, max: 15 }),
});

describe('ledger property: any sequence of concurrent operations keeps balance == sum(transactions) (postgres)', () => {
  const fixture = billingFixture('postgres');

  test('random operation sequences, run in concurrent batches, match a sequential model', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(op, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 5 }), async (batches) => {
        run++;
        const users = [0, 1, 2].map((u) => `prop-${run}-u${u}`);
        const model = new Map<string, bigint>(users.map((u) => [u, 0n]));
        const firstUse = new Map<number, Op>();
        const seen = new Set<string>();
        for (const batch of batches) {
          // The model: the first operation to claim a reference wins; later claims are replays
          // (the same transaction id back: no change) or conflicts (a different entry: refused).
          const results = await Promise.allSettled(batch.map((o) => apply(o, users, run)));
          for (const [i, o] of batch.entries()) {
            const r = results[i]!;
            if (r.status === 'rejected') expect(r.reason).toMatchObject({ kind: 'conflict' });
            if (r.status === 'fulfilled' && !seen.has(r.value)) {
              seen.add(r.value);
              expect(firstUse.has(o.ref)).toBe(false);
              firstUse.set(o.ref, o);
              const u = users[o.user]!;
              model.set(u, model.get(u)! + signed(o));
            }
          }
          // Whatever won each reference, every reference used is recorded exactly once.
          for (const o of batch) expect(firstUse.has(o.ref)).toBe(true);
        }
        for (const u of users) {
          const balance = await fixture.billing.getBalanceMicros(u);
          expect(balance).toBe(model.get(u)!);
          expect(await ledgerSumMicros(fixture.tc.ctx, u)).toBe(balance);
        }
      }),
      { numRuns: 30 },
    );
  });

  const signed = (o: Op) => (o.kind === 'debit' ? -o.amount : o.kind === 'adjust' ? -o.amount / 2n : o.amount);

  async function apply(o: Op, users: string[], run: number): Promise<string> {
    const userId = users[o.user]!;
    const reference = `prop-${run}-ref-${o.ref}`;
    const on = fixture.tc.ctx.database.db;
    if (o.kind === 'debit') return (await fixture.billing.debitUsage(on, { userId, amountMicros: o.amount, reference, description: 'p' })).transactionId;
    const type = o.kind === 'credit' ? 'topup' : 'adjustment';
    return (await fixture.billing.credit(on, { userId, type, amountMicros: signed(o), reference, description: 'p' })).transactionId;
  }
});

/**
 * Ledger write cost (issue 5), in one run on a real PostgreSQL test database:
 *  1. 10,000 usage debits spread over 1,000 wallets through billing.debitUsage, against the same
 *     number of raw single-row `UPDATE … RETURNING` statements through postgres.js on a plain
 *     table (throughput ratio, target ≥ 0.7);
 *  2. the same 10,000 debits on ONE wallet (every writer waits for the same row lock), with the
 *     raw single-row UPDATE on one row as its baseline;
 *  3. the router's batches: 256 usage entries per database transaction over the 1,000 wallets, as
 *     one billing.debitUsageMany statement against one debitUsage per entry (one writer, as the
 *     router's usage writer is; batches interleaved);
 *  4. afterwards, every wallet's balance must equal the sum of its ledger (exit 1 otherwise).
 * Both sides run with the same concurrency (CONCURRENCY, default 10) on pools of the same size.
 *
 *   bun bench/ledger.ts          (DEBITS=20000 CONCURRENCY=20 to vary)
 */
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { createBillingService } from '../src/modules/billing';
import { createTestContext } from '../tests/support/app';

const DEBITS = Number(process.env.DEBITS ?? 10_000);
const WALLETS = 1_000;
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 10);

/** Runs n jobs with `concurrency` in flight; answers the wall time in ms. */
async function timedPool(n: number, concurrency: number, job: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await job(next++);
    }),
  );
  return performance.now() - start;
}

const tc = await createTestContext('postgres');
const billing = createBillingService(tc.ctx);
const raw = postgres(tc.testDb.url!, { max: CONCURRENCY, onnotice: () => {} });
try {
  const { db } = tc.ctx.database;
  await raw`create table bench_raw (id text primary key, balance bigint not null)`;
  await raw`insert into bench_raw select 'w' || g, 0 from generate_series(0, ${WALLETS - 1}) g`;
  // Wallets exist before timing on both sides (a first write would otherwise create them).
  await Promise.all(
    Array.from({ length: WALLETS }, (_, w) =>
      billing.credit(db, { userId: `w${w}`, type: 'adjustment', amountMicros: 1n, reference: `seed-${w}`, description: 'seed' }),
    ),
  );
  const rawDebit = (id: string, amount: number) => raw`update bench_raw set balance = balance - ${amount} where id = ${id} returning balance`;
  const ledgerDebit = (userId: string, i: number, tag: string) =>
    billing.debitUsage(db, { userId, amountMicros: BigInt(1_000 + (i % 97)), reference: `${tag}-${i}`, description: 'bench usage' });

  // Warm both paths (prepared statements, connections).
  await timedPool(500, CONCURRENCY, (i) => rawDebit(`w${i % WALLETS}`, 1));
  await timedPool(500, CONCURRENCY, (i) => ledgerDebit(`w${i % WALLETS}`, i, 'warm'));

  // Interleaved rounds: the machine's load drifts, so each side gets the same share of it.
  const ROUNDS = 20;
  const per = Math.ceil(DEBITS / ROUNDS);
  const totals = { rawSpread: 0, ledgerSpread: 0, rawOne: 0, ledgerOne: 0 };
  for (let r = 0; r < ROUNDS; r++) {
    const base = r * per;
    totals.rawSpread += await timedPool(per, CONCURRENCY, (i) => rawDebit(`w${(base + i) % WALLETS}`, 1_000 + ((base + i) % 97)));
    totals.ledgerSpread += await timedPool(per, CONCURRENCY, (i) => ledgerDebit(`w${(base + i) % WALLETS}`, base + i, 'spread'));
  }
  for (let r = 0; r < ROUNDS; r++) {
    const base = r * per;
    totals.rawOne += await timedPool(per, CONCURRENCY, (i) => rawDebit('w0', 1_000 + ((base + i) % 97)));
    totals.ledgerOne += await timedPool(per, CONCURRENCY, (i) => ledgerDebit('w0', base + i, 'one'));
  }
  const { rawSpread, ledgerSpread, rawOne, ledgerOne } = totals;

  const BATCH = 256;
  const batches = Math.ceil(DEBITS / BATCH);
  const batchOf = (b: number, tag: string) =>
    Array.from({ length: BATCH }, (_, i) => {
      const n = b * BATCH + i;
      return { userId: `w${n % WALLETS}`, amountMicros: BigInt(1_000 + (n % 97)), reference: `${tag}-${n}`, description: 'bench usage' };
    });
  const timed = async (job: () => Promise<unknown>) => {
    const start = performance.now();
    await job();
    return performance.now() - start;
  };
  let many = 0;
  let each = 0;
  for (let b = 0; b < batches; b++) {
    many += await timed(() => db.transaction((tx) => billing.debitUsageMany(tx, batchOf(b, 'many'))));
    each += await timed(() =>
      db.transaction(async (tx) => {
        for (const e of batchOf(b, 'each')) await billing.debitUsage(tx, e);
      }),
    );
  }

  const [check] = await tc.ctx.database.query<{ wallets: number; mismatched: number; entries: number }>(
    sql`select count(*)::int as wallets,
               count(*) filter (where w.balance_micros <> coalesce(t.total, 0))::int as mismatched,
               (select count(*)::int from wallet_transactions) as entries
        from wallets w left join (select user_id, sum(amount_micros) as total from wallet_transactions group by user_id) t using (user_id)`,
  );

  const perSec = (ms: number) => Math.round((DEBITS / ms) * 1000);
  const line = (name: string, ms: number) => console.log(`${name.padEnd(44)} ${ms.toFixed(0).padStart(6)} ms  ${String(perSec(ms)).padStart(6)}/s`);
  console.log(`${DEBITS} debits, concurrency ${CONCURRENCY}, PostgreSQL ${tc.ctx.database.kind}`);
  line('raw UPDATE … RETURNING, 1,000 rows', rawSpread);
  line('billing.debitUsage, 1,000 wallets', ledgerSpread);
  line('raw UPDATE … RETURNING, one row', rawOne);
  line('billing.debitUsage, one wallet', ledgerOne);
  const spreadRatio = rawSpread / ledgerSpread;
  console.log(`ratio (ledger ÷ raw throughput), 1,000 wallets: ${spreadRatio.toFixed(2)} (target ≥ 0.7)`);
  console.log(`ratio (ledger ÷ raw throughput), one wallet:    ${(rawOne / ledgerOne).toFixed(2)}`);
  const batched = (name: string, ms: number) => console.log(`${name.padEnd(44)} ${ms.toFixed(0).padStart(6)} ms  ${String(Math.round(((batches * BATCH) / ms) * 1000)).padStart(6)}/s`);
  console.log(`${batches} transactions of ${BATCH} usage entries over ${WALLETS} wallets, one writer`);
  batched('billing.debitUsage per entry', each);
  batched('billing.debitUsageMany per transaction', many);
  console.log(`ratio (debitUsageMany ÷ debitUsage per entry throughput): ${(each / many).toFixed(2)}`);
  console.log(`ledger == balance: ${check!.mismatched === 0 ? 'yes' : 'NO'} (${check!.wallets} wallets, ${check!.entries} ledger entries)`);
  if (check!.mismatched !== 0 || check!.entries !== WALLETS + 500 + 2 * per * ROUNDS + 2 * batches * BATCH) process.exitCode = 1;
} finally {
  await raw.end();
  await tc.close();
}

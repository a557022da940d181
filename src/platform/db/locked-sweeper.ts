/**
 * A periodic deletion every replica runs, one replica at a time: each round takes a
 * transaction-scoped PostgreSQL advisory lock (the others skip that round) and deletes batch after
 * batch until a batch comes back short. Used for rows kept for a retention period.
 */
import { sql } from 'drizzle-orm';
import type { PlatformContext } from '../context';
import type { Db } from './index';

/** The transaction handle drizzle gives a `db.transaction` callback. */
type SweepTx = Parameters<Parameters<Db['transaction']>[0]>[0];

export interface LockedSweeperOptions {
  /** Said in the log when a round fails. */
  name: string;
  /** The advisory lock's key: a bigint constant of the caller's own, as a decimal string. */
  lockKey: string;
  everyMs: number;
  batch: number;
  /** Deletes at most `limit` expired rows inside `tx`; answers how many it deleted. */
  deleteBatch: (tx: SweepTx, limit: number) => Promise<number>;
}

export function startLockedSweeper(ctx: Pick<PlatformContext<never>, 'database' | 'log' | 'onShutdown'>, opts: LockedSweeperOptions) {
  /** One batch under the lock; null when another replica holds it. */
  const sweepBatch = (): Promise<number | null> =>
    ctx.database.db.transaction(async (tx) => {
      const [lock] = await ctx.database.query<{ locked: boolean }>(sql`select pg_try_advisory_xact_lock(${opts.lockKey}::bigint) as locked`, tx);
      if (!lock?.locked) return null;
      return opts.deleteBatch(tx, opts.batch);
    });

  /** Deletes every expired row now (the periodic round runs on its own); answers how many this process deleted. */
  async function sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await sweepBatch();
      if (!n) return total;
      total += n;
      if (n < opts.batch) return total;
    }
  }

  let running = false;
  const timer = setInterval(async () => {
    if (running) return;
    running = true;
    try {
      await sweep();
    } catch (err) {
      ctx.log.error({ err }, `${opts.name} sweep failed`);
    } finally {
      running = false;
    }
  }, opts.everyMs);
  timer.unref?.();
  ctx.onShutdown(() => clearInterval(timer));
  return { sweep };
}

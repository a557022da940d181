/**
 * Deletes captures past their retention: their objects first, then their rows, a batch at a time.
 * Every replica runs the sweep; a transaction-scoped PostgreSQL advisory lock lets one at a time
 * work (the others skip that round), so no two replicas delete the same objects at once.
 */
import { inArray, lt, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import type { ObjectStore } from '../../platform/storage';
import { captures } from './captures.tables';

const SWEEP_EVERY_MS = 10 * 60_000;
const BATCH = 500;
/** The advisory lock's key: any constant of our own ("cpd_capt" in ASCII). */
const SWEEP_LOCK_KEY = String(0x6370645f63617074n);

export function startCaptureSweeper(ctx: AppContext, store: ObjectStore) {
  const { db } = ctx.database;

  /** One batch under the lock; null when another replica holds it. */
  async function sweepBatch(): Promise<number | null> {
    return db.transaction(async (tx) => {
      const [lock] = await ctx.database.query<{ locked: boolean }>(sql`select pg_try_advisory_xact_lock(${SWEEP_LOCK_KEY}::bigint) as locked`, tx);
      if (!lock?.locked) return null;
      const expired = await tx.select({ id: captures.id, objectKey: captures.objectKey }).from(captures).where(lt(captures.expiresAt, ctx.clock.now())).limit(BATCH);
      if (!expired.length) return 0;
      // Objects first: a row whose object is gone is deleted by the next sweep; an object without its row would be kept forever.
      for (const e of expired) await store.delete(e.objectKey);
      await tx.delete(captures).where(inArray(captures.id, expired.map((e) => e.id)));
      return expired.length;
    });
  }

  /** Deletes every expired capture (batch by batch); answers how many this process deleted. */
  async function sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await sweepBatch();
      if (!n) return total;
      total += n;
      if (n < BATCH) return total;
    }
  }

  let running = false;
  const timer = setInterval(async () => {
    if (running) return;
    running = true;
    try {
      await sweep();
    } catch (err) {
      ctx.log.error({ err }, 'capture sweep failed');
    } finally {
      running = false;
    }
  }, SWEEP_EVERY_MS);
  timer.unref?.();
  ctx.onShutdown(() => clearInterval(timer));
  return { sweep };
}

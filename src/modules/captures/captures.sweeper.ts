/**
 * Deletes captures past their retention: their objects first, then their rows, a batch at a time.
 * Every replica runs the sweep; a transaction-scoped PostgreSQL advisory lock lets one at a time
 * work (the others skip that round), so no two replicas delete the same objects at once.
 */
import { inArray, lt } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { startLockedSweeper } from '../../platform/db/locked-sweeper';
import type { ObjectStore } from '../../platform/storage';
import { captures } from './captures.tables';

const SWEEP_EVERY_MS = 10 * 60_000;
const BATCH = 500;
/** The advisory lock's key: any constant of our own ("cpd_capt" in ASCII). */
const SWEEP_LOCK_KEY = String(0x6370645f63617074n);

export function startCaptureSweeper(ctx: AppContext, store: ObjectStore) {
  return startLockedSweeper(ctx, {
    name: 'capture',
    lockKey: SWEEP_LOCK_KEY,
    everyMs: SWEEP_EVERY_MS,
    batch: BATCH,
    async deleteBatch(tx, limit) {
      const expired = await tx.select({ id: captures.id, objectKey: captures.objectKey }).from(captures).where(lt(captures.expiresAt, ctx.clock.now())).limit(limit);
      if (!expired.length) return 0;
      // Objects first: a row whose object is gone is deleted by the next sweep; an object without its row would be kept forever.
      for (const e of expired) await store.delete(e.objectKey);
      await tx.delete(captures).where(inArray(captures.id, expired.map((e) => e.id)));
      return expired.length;
    },
  });
}

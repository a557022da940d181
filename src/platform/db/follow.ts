/**
 * An in-process cache of rows, kept current in every process that shares the database.
 */
import type { Logger } from '../logger';
import type { Database } from './client';

/**
 * `read` (a cache's read of its rows) one at a time, for callers who must see what was committed
 * before they called: a call while a read runs is answered by one more read after it (every such
 * call shares it). Two reads side by side could finish out of order and leave the older answer
 * in the cache until the next change (a replica whose reconnect's read was still out when a
 * price change's NOTIFY arrived could go back to the price before last and charge it); sharing
 * the running read, as the catalog did, missed a change committed after that read began.
 */
export function serialReload(read: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  const start = (): Promise<void> => {
    const run: Promise<void> = read().finally(() => {
      if (running === run) running = null;
    });
    running = run;
    return run;
  };
  return () => {
    if (!running) return start();
    next ??= running
      .catch(() => {})
      .then(() => {
        next = null;
        return start();
      });
    return next;
  };
}

/**
 * LISTEN on `channel` first, then `load` once, so a change committed between the two is never
 * missed (loading first, as this did before, also read everything twice at start: once before
 * the LISTEN and once at its first onListen). `load` runs again on every NOTIFY and after every
 * reconnect of the LISTEN connection (NOTIFYs sent while it was down are lost). Resolves after
 * the first load, whose error is the caller's; the LISTEN ends at shutdown. `load` is the cache's
 * serialReload, shared with its other callers (its own writes read back through it too).
 */
export async function followChanges(ctx: { database: Database; log: Logger; onShutdown(fn: () => Promise<void> | void): void }, channel: string, load: () => Promise<void>, what: string): Promise<void> {
  const reloadQuietly = () => void load().catch((err) => ctx.log.error({ err }, `${what} reload failed`));
  let first: Promise<void> | undefined;
  const unlisten = await ctx.database.listen(channel, reloadQuietly, () => {
    if (first) reloadQuietly();
    else first = load();
  });
  ctx.onShutdown(unlisten);
  // onListen may also come after listen() resolves (the contract says only "every time"): load now.
  first ??= load();
  await first;
}

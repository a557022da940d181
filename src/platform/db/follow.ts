/**
 * An in-process cache of rows, kept current in every process that shares the database.
 */
import type { AppContext } from '../context';

/**
 * LISTEN on `channel` first, then `load` once, so a change committed between the two is never
 * missed (loading first, as this did before, also read everything twice at start: once before
 * the LISTEN and once at its first onListen). `load` runs again on every NOTIFY and after every
 * reconnect of the LISTEN connection (NOTIFYs sent while it was down are lost). Resolves after
 * the first load, whose error is the caller's; the LISTEN ends at shutdown.
 */
export async function followChanges(ctx: Pick<AppContext, 'database' | 'log' | 'onShutdown'>, channel: string, load: () => Promise<void>, what: string): Promise<void> {
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

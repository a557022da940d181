/**
 * The cross-process "a wallet changed" signal: NOTIFY 'cpd_wallet' with a comma-separated list of
 * user ids. Entries written inside a transaction notify at its commit. A usage debit written on
 * its own (autocommit, already committed when it returns) is announced right after, coalesced
 * with others every few milliseconds: in PostgreSQL a committing transaction that has issued
 * NOTIFY holds a database-wide lock across its WAL flush, so one NOTIFY per debit would serialise
 * every debit commit in the cluster (measured with bench/ledger.ts).
 */
import type { AppContext } from '../../app-context';

export const WALLET_CHANNEL = 'cpd_wallet';
/** NOTIFY payloads must stay under 8000 bytes. */
const MAX_PAYLOAD = 7_000;

export function createWalletSignal(ctx: AppContext, coalesceMs = 20) {
  const listeners = new Set<(userId: string) => void>();
  const resyncs = new Set<() => void>();
  const queued = new Set<string>();
  let timer: ReturnType<typeof setTimeout> | null = null;
  let listening: Promise<void> | null = null;

  async function flush(): Promise<void> {
    timer = null;
    const ids = [...queued];
    queued.clear();
    while (ids.length) {
      let payload = ids.shift()!;
      while (ids.length && payload.length + ids[0]!.length + 1 <= MAX_PAYLOAD) payload += `,${ids.shift()}`;
      await ctx.database.notify(WALLET_CHANNEL, payload).catch((err) => ctx.log.warn({ err }, 'wallet change notification failed'));
    }
  }
  let subscribed = false;
  function onListen() {
    if (!subscribed) {
      subscribed = true; // the first LISTEN: nothing was missed yet
      return;
    }
    ctx.log.info({ channel: WALLET_CHANNEL }, 'wallet notifications reconnected; reloading cached balances');
    for (const resync of resyncs) {
      try {
        resync();
      } catch (err) {
        ctx.log.error({ err }, 'balance resync failed');
      }
    }
  }
  ctx.onShutdown(async () => {
    if (timer) clearTimeout(timer);
    await flush();
  });

  return {
    /** Announce a committed change of userId's wallet within a few milliseconds, with others. */
    later(userId: string) {
      queued.add(userId);
      timer ??= setTimeout(() => void flush(), coalesceMs);
    },
    /**
     * Resolves once this process listens; then listener(userId) runs for every change anywhere, and
     * resync() after every reconnect of the LISTEN connection (changes made meanwhile were not
     * announced here: whatever was cached must be reloaded).
     */
    listen(listener: (userId: string) => void, resync?: () => void): Promise<void> {
      listeners.add(listener);
      if (resync) resyncs.add(resync);
      listening ??= ctx.database
        .listen(WALLET_CHANNEL, (payload) => {
          for (const userId of payload.split(',')) {
            for (const l of listeners) {
              try {
                l(userId);
              } catch (err) {
                ctx.log.error({ err }, 'balance listener failed');
              }
            }
          }
        }, onListen)
        .then((unlisten) => ctx.onShutdown(unlisten));
      return listening;
    },
  };
}

export type WalletSignal = ReturnType<typeof createWalletSignal>;

/**
 * The periodic expiry of pending payments (reads expire them too; this catches the unread ones),
 * then the recheck of recently failed and expired ones at their provider, then the admin refunds
 * still pending at theirs.
 */
import type { AppContext } from '../../app-context';
import type { Payments } from './payments.service';
import type { Refunds } from './refunds.service';

export function startSweeper(ctx: AppContext, payments: Payments, refunds: Refunds, intervalMs: number): () => void {
  let running = false;
  const timer = setInterval(async () => {
    if (running) return; // a slow provider must not stack sweeps
    running = true;
    try {
      await payments.sweep({ limit: 500 });
      await payments.recheckClosed(500);
      await refunds.settlePending({ limit: 500 });
    } catch (err) {
      ctx.log.error({ err }, 'payment sweep failed');
    } finally {
      running = false;
    }
  }, intervalMs);
  timer.unref?.();
  const stop = () => clearInterval(timer);
  ctx.onShutdown(stop);
  return stop;
}

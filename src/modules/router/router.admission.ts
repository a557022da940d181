/**
 * Per-user admission against the wallet, from memory. Concurrent requests may overspend a balance
 * by at most one request:
 *
 *   available = cached balance − debits queued but not yet committed − reservations in flight
 *
 * A request reserves an upper estimate of its cost. It is admitted at once when `available` covers
 * that estimate; otherwise it is "at the margin": it waits (up to ROUTER_ADMISSION_WAIT) until the
 * user has nothing else in flight and is then admitted alone if `available` is still above zero,
 * else refused (402). So only one request at a time can be the one that crosses zero. The
 * guarantee is strict when the estimate is an upper bound (per_request prices, or max_tokens set);
 * see docs/gateway.md. Reservations are per process: N replicas can each let one request cross.
 *
 * The balance cache is invalidated across processes by billing's NOTIFY: on a change the entry is
 * reloaded in the background (a generation counter discards reloads that raced with a commit of
 * ours); our own commits set it from the balance the debit returned, and reload once more when a
 * change was announced meanwhile. After the notification connection reconnects, every entry reloads.
 */
import { AppError } from '../../platform/errors';
import type { Logger } from '../../platform/logger';

interface BalanceSource {
  getBalanceMicros(userId: string): Promise<bigint>;
  onBalanceChange(listener: (userId: string) => void, resync: () => void): Promise<void>;
}

interface UserState {
  balance: bigint | null;
  gen: number;
  loading: Promise<void> | null;
  /** A change was announced since our last commit: the balance that commit returned may predate it. */
  changed: boolean;
  pending: bigint;
  reserved: bigint;
  inflight: number;
  waiters: Array<() => void>;
}

export interface Ticket {
  /** Ends the reservation; `costMicros` becomes a queued debit until the usage writer commits it. */
  settle(costMicros: bigint): void;
}

const SWEEP_ABOVE = 50_000;

export function createAdmission(source: BalanceSource, log: Logger, waitMs: number) {
  const users = new Map<string, UserState>();

  const stateOf = (userId: string): UserState => {
    let s = users.get(userId);
    if (!s) {
      if (users.size > SWEEP_ABOVE) sweep();
      s = { balance: null, gen: 0, loading: null, changed: false, pending: 0n, reserved: 0n, inflight: 0, waiters: [] };
      users.set(userId, s);
    }
    return s;
  };

  function sweep() {
    for (const [id, s] of users) if (s.inflight === 0 && s.pending === 0n && !s.loading) users.delete(id);
  }

  function load(userId: string, s: UserState): Promise<void> {
    const gen = s.gen;
    const p = source
      .getBalanceMicros(userId)
      .then((b) => {
        if (s.gen === gen) {
          s.balance = b;
          wake(s);
        }
      })
      .catch((err) => log.error({ err, user_id: userId }, 'balance load failed'))
      .finally(() => {
        if (s.loading === p) s.loading = null;
      });
    s.loading = p;
    return p;
  }

  function wake(s: UserState) {
    const w = s.waiters;
    s.waiters = [];
    for (const fn of w) fn();
  }

  function reloadAfterChange(userId: string, s: UserState) {
    s.changed = true;
    s.gen++;
    void load(userId, s);
  }

  const ready = source.onBalanceChange(
    (userId) => {
      const s = users.get(userId);
      if (s) reloadAfterChange(userId, s);
    },
    // The notification connection came back: any cached balance may have missed a change.
    () => {
      for (const [userId, s] of users) reloadAfterChange(userId, s);
    },
  );

  async function balanceOf(userId: string, s: UserState): Promise<bigint> {
    while (s.balance === null) {
      await (s.loading ?? load(userId, s));
      if (s.balance === null && !s.loading) throw new AppError('unavailable', 'balance unavailable');
    }
    return s.balance;
  }

  async function admit(userId: string, estimateMicros: bigint, signal?: AbortSignal): Promise<Ticket> {
    const s = stateOf(userId);
    const deadline = Date.now() + waitMs;
    for (;;) {
      const available = (await balanceOf(userId, s)) - s.pending - s.reserved;
      const covered = available - estimateMicros > 0n;
      if (covered || (s.inflight === 0 && available > 0n)) return take(s, estimateMicros);
      if (s.inflight === 0) throw new AppError('payment_required', 'insufficient balance');
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted) throw new AppError('payment_required', 'insufficient balance: the rest is reserved by requests in flight');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        s.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  function take(s: UserState, estimate: bigint): Ticket {
    s.inflight++;
    s.reserved += estimate;
    let settled = false;
    return {
      settle(cost) {
        if (settled) return;
        settled = true;
        s.inflight--;
        s.reserved -= estimate;
        s.pending += cost;
        wake(s);
      },
    };
  }

  return {
    /** Resolves once the cross-process invalidation is listening. */
    ready,
    admit,
    /** The usage writer committed these debits; `balances` holds each user's balance after its last one. */
    committed(debits: Map<string, bigint>, balances: Map<string, bigint>) {
      for (const [userId, cost] of debits) {
        const s = users.get(userId);
        if (!s) continue;
        s.pending -= cost;
        const b = balances.get(userId);
        if (b !== undefined) {
          // Ordering, not timing: a commit's balance may predate a change announced before it
          // arrived (a top-up). Then, or when a reload is in flight (this commit discards it), one
          // more reload starts now, after that change committed, and sees it.
          const reloadAfter = s.changed || s.loading !== null;
          s.changed = false;
          s.gen++;
          s.balance = b;
          if (reloadAfter) void load(userId, s);
        }
        wake(s);
      }
    },
  };
}

export type Admission = ReturnType<typeof createAdmission>;

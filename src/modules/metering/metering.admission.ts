/**
 * Admission against the wallet, with a hard overspend bound across processes.
 *
 * Each process holds a grant of a wallet's balance in the database (billing's wallet grants; the
 * live grants of one wallet never sum above its balance) and admits against it from memory:
 *
 *   covered = grant − holds of this process's requests in flight ≥ this request's upper bound
 *
 * A covered request needs no database round trip. Otherwise the process asks for a larger grant
 * (what it needs plus headroom, at most half of what is left). A request still not covered, while
 * others of the wallet are in flight or waiting here, may take a share instead when its caller can
 * serve it with less than its upper bound (a chat request with a smaller completion allowance:
 * router.service.ts): half of what is free in the grant, at least its minimum. Its hold is then
 * that share, which its allowance keeps its cost within. Any other request is at the margin: it
 * waits until this process has nothing else in flight for the wallet, then asks for the margin,
 * which the database gives to one process per wallet at a time, with all that is left of the
 * balance; it is admitted when that is above zero, holding what is left (its minimum when less is
 * left, its upper bound when more is), and its allowance keeps it there. So across every
 * process only one request at a time can take a wallet below zero, by at most its own actual cost
 * (when every upper bound holds; docs/design/overspend.md). A usage commit lowers the grant by the cost in
 * the same transaction; the request's hold is held until then. A process renews its grants every
 * third of WALLET_GRANT_TTL and stops using them locally before they could expire; a dead
 * process's grants expire. An idle wallet's grant is given back after a second.
 *
 * The API key spend limits (metering.key-limits.ts) run this same admission over a key's remaining
 * budget in its period, with their own grants table and refusals; forget() serves them when a key's
 * limit or period changes.
 */
import type { Grant, GrantAnswer, GrantRequest } from '../billing';
import { isDatabaseUnreachable } from '../../platform/db';
import { AppError } from '../../platform/errors';
import type { Logger } from '../../platform/logger';

export interface GrantSource {
  request(req: GrantRequest): Promise<GrantAnswer>;
  endMargin(userId: string, holder: string): Promise<Grant | null>;
  giveBack(userId: string, holder: string, version: number): Promise<void>;
  renewAll(holder: string, ttlMs: number): Promise<void>;
  releaseAll(holder: string): Promise<void>;
}

interface WalletState {
  grant: bigint;
  version: number;
  margin: boolean;
  reserved: bigint;
  inflight: number;
  /** Requests in admit() for this wallet, not yet admitted or refused. */
  waiting: number;
  asking: Promise<GrantAnswer> | null;
  waiters: Array<() => void>;
  idle: ReturnType<typeof setTimeout> | null;
  /** Bumped by forget(): an answer to a question asked before then says nothing about the grant. */
  epoch: number;
  /** Since forget(), until a question asked after it is answered: the database's grant is not ours to use. */
  forgotten: boolean;
}

export interface Ticket {
  /** What the request holds: its upper bound, or less (a share, or what was left at the margin) down to its minimum. */
  holdMicros: bigint;
  /** Ends the request's hold, after its usage committed (or could not be written). */
  release(): void;
}

/** What a request asks admission for: its upper bound, and the least it can be served with (the bound when it cannot do with less). */
export interface Need {
  estimate: bigint;
  minimum: bigint;
}

export interface AdmissionOptions {
  holder: string;
  grantTtlMs: number;
  /** How long a request at the margin waits for this wallet's other requests to settle. */
  waitMs: number;
  /** The refusals' texts (the API key spend limits reuse this admission with their own). */
  refusals?: Refusals;
}

export interface Refusals {
  /** Nothing is left (402). */
  exhausted: string;
  /** What is left is held by requests in flight (402). */
  reserved: string;
  /** The database cannot be asked (503). */
  unavailable: string;
}

const WALLET_REFUSALS: Refusals = {
  exhausted: 'insufficient balance',
  reserved: 'insufficient balance: the rest is reserved by requests in flight',
  unavailable: 'the balance cannot be checked right now',
};

/** Headroom asked with a grant, in requests like the one asking: fewer round trips, less left to others. */
const HEADROOM_REQUESTS = 64n;
const IDLE_GIVE_BACK_MS = 1_000;
/** While waiting at the margin, how often the database is asked again (other processes give back). */
const MARGIN_POLL_MS = 100;

const clamp = (v: bigint, low: bigint, high: bigint) => (v < low ? low : v > high ? high : v);

export function createAdmission(
  grants: GrantSource,
  onBalanceChange: (listener: (userId: string) => void, resync: () => void) => Promise<void>,
  log: Logger,
  opts: AdmissionOptions,
) {
  const wallets = new Map<string, WalletState>();
  const { holder, grantTtlMs } = opts;
  const refusals = opts.refusals ?? WALLET_REFUSALS;
  /** Local grants are used only until this time (ms): a renewal sent at t keeps them until t + ttl − slack. */
  let usableUntil = 0;
  const slack = Math.min(2_000, grantTtlMs / 4);

  const stateOf = (userId: string): WalletState => {
    let s = wallets.get(userId);
    if (!s) {
      s = { grant: 0n, version: 0, margin: false, reserved: 0n, inflight: 0, waiting: 0, asking: null, waiters: [], idle: null, epoch: 0, forgotten: false };
      wallets.set(userId, s);
    }
    return s;
  };

  function learn(s: WalletState, g: Grant) {
    if (g.version < s.version) return;
    s.version = g.version;
    s.grant = g.amountMicros;
    s.margin = g.margin;
  }

  function wake(s: WalletState) {
    const w = s.waiters;
    s.waiters = [];
    for (const fn of w) fn();
  }

  /** One question per wallet at a time: callers check `s.asking` first and use its answer. */
  async function ask(userId: string, s: WalletState, estimate: bigint, margin: boolean): Promise<GrantAnswer> {
    const sentAt = Date.now();
    const epoch = s.epoch;
    // Asks for every request waiting on this wallet at once (a burst then needs one round trip, not one per 64).
    const waiting = BigInt(Math.max(1, s.waiting));
    const p = grants.request({ userId, holder, needMicros: s.reserved + estimate * waiting, extraMicros: estimate * HEADROOM_REQUESTS, margin, ttlMs: grantTtlMs });
    s.asking = p;
    try {
      const answer = await p;
      if (epoch === s.epoch) s.forgotten = false;
      // Asked before a forget(): keep its margin and version (so it is given back), not its amount.
      learn(s, s.forgotten ? { ...answer, amountMicros: 0n } : answer);
      usableUntil = Math.max(usableUntil, sentAt + grantTtlMs - slack);
      return answer;
    } finally {
      s.asking = null;
    }
  }

  const usable = () => Date.now() < usableUntil;
  const free = (s: WalletState) => s.grant - s.reserved;
  const covered = (s: WalletState, estimate: bigint) => usable() && free(s) >= estimate;

  /**
   * A request not covered while others of this wallet are in flight or waiting, admitted now with
   * less: half of what is free (so a burst shares what is left rather than one request taking it
   * all), at least its minimum. Null when not even that, or when it is alone: a lone request goes to
   * the margin, where it may have all that is left.
   */
  function shareOf(s: WalletState, need: Need): bigint | null {
    if (need.minimum >= need.estimate || !usable() || free(s) < need.minimum || (s.inflight === 0 && s.waiting <= 1)) return null;
    const half = free(s) / 2n;
    return half > need.minimum ? half : need.minimum;
  }

  /** Admitted from this process's grant: covered, or a share of it; null when neither. */
  function fromGrant(userId: string, s: WalletState, need: Need): Ticket | null {
    if (covered(s, need.estimate)) return take(userId, s, need.estimate, false);
    const share = shareOf(s, need);
    return share === null ? null : take(userId, s, share, false);
  }

  async function admit(userId: string, need: Need, signal?: AbortSignal): Promise<Ticket> {
    const s = stateOf(userId);
    if (s.idle) clearTimeout(s.idle);
    s.idle = null;
    s.waiting++;
    try {
      return await admitWaiting(userId, s, need, signal);
    } finally {
      s.waiting--;
      // A refused request leaves nothing to release: the grant is given back from here instead.
      if (s.inflight === 0 && s.waiting === 0 && !s.idle) s.idle = setTimeout(() => giveBack(userId, s), IDLE_GIVE_BACK_MS).unref();
    }
  }

  async function admitWaiting(userId: string, s: WalletState, need: Need, signal?: AbortSignal): Promise<Ticket> {
    const deadline = Date.now() + opts.waitMs;
    const { estimate, minimum } = need;
    for (;;) {
      const now = fromGrant(userId, s, need);
      if (now) return now;
      let answer: GrantAnswer;
      try {
        if (s.asking) {
          // Another request of this wallet is asking (a burst asks once for all): use its answer;
          // when it does not cover this request, wait like a request at the margin.
          answer = await s.asking;
          const admitted = fromGrant(userId, s, need);
          if (admitted) return admitted;
          if (answer.balanceMicros <= 0n) throw new AppError('payment_required', refusals.exhausted);
        } else {
          answer = await ask(userId, s, estimate, false);
          const admitted = fromGrant(userId, s, need);
          if (admitted) return admitted;
          if (answer.balanceMicros <= 0n) throw new AppError('payment_required', refusals.exhausted);
          if (s.inflight === 0 && !s.margin && !s.asking) {
            answer = await ask(userId, s, estimate, true);
            // All that is left, down to the minimum: the one request that may cross zero.
            if (s.margin && s.grant > 0n && usable()) return take(userId, s, clamp(free(s), minimum, estimate), true);
            if (s.margin) releaseMargin(userId, s);
          }
        }
      } catch (err) {
        if (err instanceof AppError) throw err;
        // The database not serving us is answered as on every other route (503 "database unavailable").
        if (Date.now() >= deadline) throw isDatabaseUnreachable(err) ? err : new AppError('unavailable', refusals.unavailable);
        log.warn({ err, user_id: userId }, 'wallet grant request failed; retrying');
      }
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted) throw new AppError('payment_required', refusals.reserved);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, MARGIN_POLL_MS));
        s.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  function releaseMargin(userId: string, s: WalletState) {
    s.margin = false;
    grants
      .endMargin(userId, holder)
      .then((g) => g && !s.forgotten && learn(s, g))
      .catch((err) => log.warn({ err, user_id: userId }, 'could not give the margin back; it expires with the grant'));
  }

  function take(userId: string, s: WalletState, hold: bigint, margin: boolean): Ticket {
    s.inflight++;
    s.reserved += hold;
    let released = false;
    return {
      holdMicros: hold,
      release() {
        if (released) return;
        released = true;
        s.inflight--;
        s.reserved -= hold;
        if (margin) releaseMargin(userId, s);
        if (s.inflight === 0) s.idle = setTimeout(() => giveBack(userId, s), IDLE_GIVE_BACK_MS).unref();
        wake(s);
      },
    };
  }

  function giveBack(userId: string, s: WalletState) {
    s.idle = null;
    if (s.inflight > 0 || s.waiting > 0 || s.margin || s.asking) return;
    const version = s.version;
    wallets.delete(userId);
    grants.giveBack(userId, holder, version).catch((err) => log.warn({ err, user_id: userId }, 'could not give an idle grant back; it expires'));
  }

  const renewer = setInterval(() => {
    if (!wallets.size) return;
    const sentAt = Date.now();
    grants
      .renewAll(holder, grantTtlMs)
      .then(() => {
        usableUntil = Math.max(usableUntil, sentAt + grantTtlMs - slack);
      })
      .catch((err) => log.warn({ err }, 'wallet grants not renewed'));
  }, grantTtlMs / 3);
  renewer.unref();

  // Nothing is cached from these notifications (a request not covered by its grant asks the
  // database, which sees every top-up at once); they only let a request waiting at the margin ask
  // again now rather than at its next poll.
  const ready = onBalanceChange(
    (userId) => {
      const s = wallets.get(userId);
      if (s) wake(s);
    },
    () => {
      for (const s of wallets.values()) wake(s);
    },
  );

  return {
    /** Resolves once balance changes are listened to. */
    ready,
    admit,
    /** The usage writer committed debits that lowered these grants of ours. */
    committed(changed: Map<string, Grant>) {
      for (const [userId, g] of changed) {
        const s = wallets.get(userId);
        if (s && !s.forgotten) learn(s, g);
      }
    },
    /**
     * Stops admitting against this wallet's local grant (what it is a share of changed): the next
     * request asks the database. Requests in flight keep their holds.
     */
    forget(userId: string) {
      const s = wallets.get(userId);
      if (!s) return;
      s.grant = 0n;
      s.epoch++;
      s.forgotten = true;
    },
    /** Gives every grant back (graceful stop, after the usage writer drained). */
    async close() {
      clearInterval(renewer);
      for (const s of wallets.values()) if (s.idle) clearTimeout(s.idle);
      wallets.clear();
      // Bounded: with the database away the grants simply expire.
      let timer: Timer | undefined;
      const giveUp = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, 1_000);
      });
      await Promise.race([grants.releaseAll(holder).catch((err) => log.warn({ err }, 'wallet grants not given back; they expire')), giveUp]);
      clearTimeout(timer);
    },
  };
}

export type Admission = ReturnType<typeof createAdmission>;

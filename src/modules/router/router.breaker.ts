/**
 * A circuit breaker per backend (ROUTER_BREAKER), in the manner of resilience4j's count-over-time
 * breaker: attempts and backend failures are counted in a sliding window of ten buckets.
 *
 *   closed     every request may go; when failures / attempts reach the rate with at least the
 *              minimum of attempts in the window, the breaker opens.
 *   open       the backend is out of rotation for the cool-down (doubling after each failed
 *              probe, up to eight times the configured one); outcomes of requests that still
 *              reach it (the last resort, below) are not counted.
 *   half-open  after the cool-down: one request at a time goes as a probe; its success closes the
 *              breaker (a fresh window), its failure opens it again; other requests that reach it
 *              (the last resort) are not counted.
 *
 * Open → half-open happens at the first look after the cool-down (a request, a listing, a scrape):
 * nothing needs a timer. Only backend failures count (no answer, a timeout, a 5xx, 429, an answer
 * that is not one); what the caller's own request caused is an answer, so it counts as a success.
 * Each process keeps its own breakers: a replica judges a backend by what it has seen itself.
 */
import type { BreakerSettings } from '../../config-router';

export type BreakerState = 'closed' | 'open' | 'half-open';

/** What a breaker change is told with. */
export interface BreakerChange {
  from: BreakerState;
  to: BreakerState;
  /** Attempts and failures in the window when the breaker opened from closed (null otherwise). */
  attempts: number | null;
  failures: number | null;
  /** Epoch ms when an opened breaker lets a probe through (null when not opened). */
  probeAt: number | null;
}

export interface BreakerView {
  state: BreakerState;
  /** Attempts and backend failures counted in the window (closed), as of now. */
  attempts: number;
  failures: number;
  /** While open: when the next probe may go. */
  probe_at: string | null;
}

const BUCKETS = 10;
/** The longest cool-down, as a multiple of the configured one. */
const MAX_COOL_DOWN_FACTOR = 8;

export function createBreaker(settings: BreakerSettings, now: () => number, onChange: (change: BreakerChange) => void) {
  const bucketMs = settings.windowMs / BUCKETS;
  const attempts = new Array<number>(BUCKETS).fill(0);
  const failures = new Array<number>(BUCKETS).fill(0);
  /** Which bucket number (time / bucketMs) each slot holds now. */
  const epochs = new Array<number>(BUCKETS).fill(-1);
  let state: BreakerState = 'closed';
  let probeAt = 0;
  let coolDownMs = settings.coolDownMs;
  /** The probe in flight while half-open (any token that identifies the request). */
  let probe: unknown = null;

  function slot(at: number): number {
    const epoch = Math.floor(at / bucketMs);
    const i = epoch % BUCKETS;
    if (epochs[i] !== epoch) {
      epochs[i] = epoch;
      attempts[i] = 0;
      failures[i] = 0;
    }
    return i;
  }

  function totals() {
    const oldest = Math.floor(now() / bucketMs) - BUCKETS + 1;
    let a = 0;
    let f = 0;
    for (let i = 0; i < BUCKETS; i++)
      if (epochs[i]! >= oldest) {
        a += attempts[i]!;
        f += failures[i]!;
      }
    return { attempts: a, failures: Math.min(f, a) };
  }

  function move(to: BreakerState, counted: { attempts: number; failures: number } | null = null) {
    const from = state;
    state = to;
    probe = null;
    if (to === 'open') probeAt = now() + coolDownMs;
    if (to === 'closed') {
      coolDownMs = settings.coolDownMs;
      epochs.fill(-1);
    }
    onChange({ from, to, attempts: counted?.attempts ?? null, failures: counted?.failures ?? null, probeAt: to === 'open' ? probeAt : null });
  }

  /** The state now: an open breaker whose cool-down is over is half-open. */
  function current(): BreakerState {
    if (state === 'open' && now() >= probeAt) move('half-open');
    return state;
  }

  function tripIfOver() {
    const counted = totals();
    if (counted.attempts >= settings.minimumAttempts && counted.failures >= settings.failureRate * counted.attempts) move('open', counted);
  }

  return {
    current,
    /** Whether a request may go now: closed, or half-open with no probe in flight. */
    allows: () => current() === 'closed' || (state === 'half-open' && probe === null),
    /** When an open breaker lets its probe through (epoch ms); 0 otherwise. */
    probeAt: () => (current() === 'open' ? probeAt : 0),
    /** A request goes to the backend: while half-open it is the probe. */
    begin(token: unknown) {
      if (current() === 'half-open' && probe === null) probe = token;
    },
    /** The request ended without a verdict on the backend (the client went away, its time ran out): another may probe. */
    end(token: unknown) {
      if (probe === token) probe = null;
    },
    /** The backend answered `token`'s request (while half-open only the probe's answer counts). */
    succeeded(token: unknown) {
      if (current() === 'half-open') {
        if (token === probe) move('closed');
      }
      else if (state === 'closed') {
        attempts[slot(now())]!++;
        // A success may bring the window to its minimum of attempts with the rate already reached.
        tripIfOver();
      }
    },
    /** The backend failed `token`'s request (while half-open only the probe's failure counts). */
    failed(token: unknown) {
      if (current() === 'half-open') {
        if (token !== probe) return;
        coolDownMs = Math.min(coolDownMs * 2, settings.coolDownMs * MAX_COOL_DOWN_FACTOR);
        move('open');
      } else if (state === 'closed') {
        const i = slot(now());
        attempts[i]!++;
        failures[i]!++;
        tripIfOver();
      }
    },
    /** A request already counted as a success failed later (a stream broke): one more failure, not one more attempt. */
    brokeAfterSuccess() {
      if (current() !== 'closed') return;
      failures[slot(now())]!++;
      tripIfOver();
    },
    /** A fresh start (the backend's key changed): closed, with an empty window. */
    reset() {
      if (state === 'closed') epochs.fill(-1);
      else move('closed');
    },
        view(): BreakerView {
      const s = current();
      const counted = s === 'closed' ? totals() : { attempts: 0, failures: 0 };
      return { state: s, ...counted, probe_at: s === 'open' ? new Date(probeAt).toISOString() : null };
    },
  };
}

export type Breaker = ReturnType<typeof createBreaker>;

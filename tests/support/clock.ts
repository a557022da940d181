import type { Clock } from '../../src/platform/clock';

/** The one test clock: it moves only when a test advances it, so expiries and refills need no waiting. */
export function manualClock(start = Date.now()): Clock & { advance(ms: number): void } {
  let now = start;
  return {
    now: () => new Date(now),
    advance(ms) {
      now += ms;
    },
  };
}

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;

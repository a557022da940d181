import type { Clock } from '../../../src/platform/clock';

/** A clock that moves only when a test advances it, so TTLs expire without waiting. */
export function manualClock(start = Date.parse('2026-04-01T00:00:00Z')) {
  let now = start;
  const clock: Clock & { advance(ms: number): void } = {
    now: () => new Date(now),
    advance: (ms) => {
      now += ms;
    },
  };
  return clock;
}

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;

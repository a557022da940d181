/** A clock tests move by hand: expiry and rate-limit refills without sleeping. */
export function testClock(start = Date.parse('2026-01-01T00:00:00Z')) {
  let now = start;
  return {
    now: () => new Date(now),
    advance(ms: number) {
      now += ms;
    },
  };
}

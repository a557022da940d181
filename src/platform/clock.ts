/** Time source; tests pass a fixed or advancing clock instead of sleeping. */
export interface Clock {
  now(): Date;
}
export const systemClock: Clock = { now: () => new Date() };

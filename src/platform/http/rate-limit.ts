/**
 * Token-bucket rate limiting, in memory per process. A bucket holds `capacity` tokens and refills
 * `refillPerSec`; an empty bucket answers 429 with Retry-After. Idle buckets are swept.
 */
import { AppError } from '../errors';

export interface RateLimit {
  capacity: number;
  refillPerSec: number;
}

export class TokenBucketLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private lastSweep = 0;

  constructor(
    readonly limit: RateLimit,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Takes `cost` tokens for `key`; returns 0 when allowed, else the seconds until it would be. */
  take(key: string, cost = 1): number {
    const now = this.now();
    this.sweep(now);
    const { capacity, refillPerSec } = this.limit;
    const bucket = this.buckets.get(key) ?? { tokens: capacity, at: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.at) / 1000) * refillPerSec);
    bucket.at = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= cost) {
      bucket.tokens -= cost;
      return 0;
    }
    return Math.max(1, Math.ceil((cost - bucket.tokens) / refillPerSec));
  }

  /** Throws AppError('rate_limited') with Retry-After when `key` is over its limit. */
  enforce(key: string, cost = 1, what = 'too many requests'): void {
    const wait = this.take(key, cost);
    if (wait > 0) throw new AppError('rate_limited', what, { 'retry-after': String(wait) });
  }

  /** Gives back `cost` tokens taken for `key` (a login that succeeded is not held against it). */
  refund(key: string, cost = 1): void {
    const bucket = this.buckets.get(key);
    if (bucket) bucket.tokens = Math.min(this.limit.capacity, bucket.tokens + cost);
  }

  reset(key: string): void {
    this.buckets.delete(key);
  }

  private sweep(now: number) {
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    const fullAfterMs = (this.limit.capacity / this.limit.refillPerSec) * 1000;
    for (const [key, b] of this.buckets) if (now - b.at > fullAfterMs) this.buckets.delete(key);
  }
}

/**
 * The app's named limits and their defaults. Each is a token bucket per key (an identifier, a
 * client address, a credential); `capacity` is the burst, refilled at `refillPerSec`.
 * Override any of them with RATE_LIMITS, e.g. `RATE_LIMITS=login=20/1m,gateway=1200/1m`
 * (N/duration: a burst of N, refilled at N per duration).
 */
export const namedLimits = {
  /** Login attempts, per identifier and per client address; a successful login is refunded. */
  login: { capacity: 10, refillPerSec: 10 / 60 },
  /** Registrations, per email and per client address. */
  register: { capacity: 10, refillPerSec: 10 / 3600 },
  /** 2FA code attempts (verify, enable, disable), per challenge or account and per client address. */
  twofa: { capacity: 10, refillPerSec: 10 / 60 },
  /** Model downloads, per credential (session user or API key). */
  download: { capacity: 60, refillPerSec: 60 / 60 },
  /** Gateway requests, per API key. */
  gateway: { capacity: 600, refillPerSec: 600 / 60 },
} satisfies Record<string, RateLimit>;

export type LimitName = keyof typeof namedLimits;
export const LIMIT_NAMES = Object.keys(namedLimits) as LimitName[];

/**
 * A limiter for one named limit, honouring RATE_LIMITS overrides in `config.rateLimits` and
 * reading time from the app clock (tests advance it instead of sleeping).
 *   const downloads = namedLimiter(ctx, 'download');  downloads.enforce(caller.keyId ?? caller.userId);
 */
export function namedLimiter(
  ctx: { config: { rateLimits: Partial<Record<LimitName, RateLimit>> }; clock: { now(): Date } },
  name: LimitName,
): TokenBucketLimiter {
  return new TokenBucketLimiter(ctx.config.rateLimits[name] ?? namedLimits[name], () => ctx.clock.now().getTime());
}

/** Every named limiter at once: `const limiters = createLimiters(ctx); limiters.gateway.enforce(keyId)`. */
export function createLimiters(ctx: Parameters<typeof namedLimiter>[0]): Record<LimitName, TokenBucketLimiter> {
  return Object.fromEntries(LIMIT_NAMES.map((name) => [name, namedLimiter(ctx, name)])) as Record<LimitName, TokenBucketLimiter>;
}

/** Parses RATE_LIMITS (`name=N/duration,…`); throws on an unknown name or a malformed value. */
export function parseRateLimits(raw: string, parseDurationMs: (raw: string) => number): Partial<Record<LimitName, RateLimit>> {
  const out: Partial<Record<LimitName, RateLimit>> = {};
  for (const entry of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^(\w+)=(\d+)\/(.+)$/.exec(entry);
    if (!m) throw new Error(`"${entry}" is not name=N/duration (example: login=10/1m)`);
    const name = m[1] as LimitName;
    if (!LIMIT_NAMES.includes(name)) throw new Error(`"${m[1]}" is not one of ${LIMIT_NAMES.join(', ')}`);
    const capacity = Number(m[2]);
    if (capacity < 1) throw new Error(`${name}: the burst must be at least 1`);
    out[name] = { capacity, refillPerSec: capacity / (parseDurationMs(m[3]!) / 1000) };
  }
  return out;
}

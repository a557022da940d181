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

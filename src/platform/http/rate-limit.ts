/**
 * Token-bucket rate limiting, in memory per process. A bucket holds `capacity` tokens and refills
 * `refillPerSec`; an empty bucket answers 429 with Retry-After. Memory is bounded: idle buckets
 * are swept, and past `maxKeys` the least recently used bucket is dropped (a flood of new
 * identifiers or addresses cannot grow the map without limit; a dropped bucket starts full again,
 * which only forgives the quietest key).
 *
 * Replicas share each limit: with N live replicas (the membership heartbeat, modules/replicas)
 * every bucket holds `capacity ÷ N` and refills `refillPerSec ÷ N`, so N replicas behind a
 * balancer that spreads each client over them admit the configured limit in total, while the
 * request path stays in memory. Tokens are kept in units of the whole limit and a request takes N
 * of them: the same bound, and a bucket keeps how full it is when N changes (it rescales).
 */
import { AppError } from '../errors';
import { LIMIT_NAMES, type LimitName, namedLimits, type RateLimit } from '../limits';
import type { PlatformConfig } from '../platform-config';

export { LIMIT_NAMES, type LimitName, namedLimits, type RateLimit } from '../limits';

/** Keys held per limiter before the least recently used one is dropped (about 10 MB at most). */
export const DEFAULT_MAX_KEYS = 100_000;

/** How many replicas share every limit now; a process without a membership is alone. */
export interface ReplicaCount {
  readonly live: number;
}
export const ALONE: ReplicaCount = { live: 1 };

export class TokenBucketLimiter {
  /** Map order is recency order: a key touched is moved to the end, eviction takes the first. */
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private lastSweep = 0;

  constructor(
    readonly limit: RateLimit,
    private readonly now: () => number = () => performance.now(),
    private readonly maxKeys = DEFAULT_MAX_KEYS,
    private readonly replicas: ReplicaCount = ALONE,
  ) {}

  /** This replica's part of a request: N tokens of the whole limit. */
  private get parts(): number {
    return Math.max(1, this.replicas.live);
  }

  /**
   * The bucket's size in units of the whole limit: the limit, but at least one request per
   * replica (a limit smaller than the replica count cannot be split; each replica then admits one).
   */
  private get capacity(): number {
    return Math.max(this.limit.capacity, this.parts);
  }

  /** How many keys are held now (for the memory bound's test). */
  get size(): number {
    return this.buckets.size;
  }

  /** Takes `cost` tokens for `key`; returns 0 when allowed, else the seconds until it would be. */
  take(key: string, cost = 1): number {
    const now = this.now();
    this.sweep(now);
    const { capacity, parts } = this;
    const { refillPerSec } = this.limit;
    const need = cost * parts;
    const bucket = this.buckets.get(key) ?? { tokens: capacity, at: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.at) / 1000) * refillPerSec);
    bucket.at = now;
    this.buckets.delete(key);
    this.buckets.set(key, bucket);
    if (this.buckets.size > this.maxKeys) this.buckets.delete(this.buckets.keys().next().value!);
    if (bucket.tokens >= need) {
      bucket.tokens -= need;
      return 0;
    }
    return Math.max(1, Math.ceil((need - bucket.tokens) / refillPerSec));
  }

  /** Throws AppError('rate_limited') with Retry-After when `key` is over its limit. */
  enforce(key: string, cost = 1, what = 'too many requests'): void {
    const wait = this.take(key, cost);
    if (wait > 0) throw new AppError('rate_limited', what, { 'retry-after': String(wait) });
  }

  /** Gives back `cost` tokens taken for `key` (a login that succeeded is not held against it). */
  refund(key: string, cost = 1): void {
    const bucket = this.buckets.get(key);
    if (bucket) bucket.tokens = Math.min(this.capacity, bucket.tokens + cost * this.parts);
  }

  private sweep(now: number) {
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    const fullAfterMs = (this.capacity / this.limit.refillPerSec) * 1000;
    for (const [key, b] of this.buckets) if (now - b.at > fullAfterMs) this.buckets.delete(key);
  }
}

/**
 * A limiter for one named limit, honouring RATE_LIMITS overrides in `config.rateLimits` and
 * reading time from the app clock (tests advance it instead of sleeping) and sharing it with the
 * other live replicas (`ctx.replicas`; alone without one).
 *   const downloads = namedLimiter(ctx, 'download');  downloads.enforce(caller.keyId ?? caller.userId);
 */
export function namedLimiter(
  ctx: { config: Pick<PlatformConfig, 'rateLimits'>; clock: { now(): Date }; replicas?: ReplicaCount },
  name: LimitName,
): TokenBucketLimiter {
  return new TokenBucketLimiter(ctx.config.rateLimits[name] ?? namedLimits[name], () => ctx.clock.now().getTime(), DEFAULT_MAX_KEYS, ctx.replicas);
}

/** Every named limiter at once: `const limiters = createLimiters(ctx); limiters.gateway.enforce(keyId)`. */
export function createLimiters(ctx: Parameters<typeof namedLimiter>[0]): Record<LimitName, TokenBucketLimiter> {
  return Object.fromEntries(LIMIT_NAMES.map((name) => [name, namedLimiter(ctx, name)])) as Record<LimitName, TokenBucketLimiter>;
}

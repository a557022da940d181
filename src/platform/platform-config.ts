import type { LimitName, RateLimit } from './limits';

/**
 * The settings platform code reads, a part of the site's Config (config.ts parses them with the
 * rest): platform takes this and never the whole Config, which belongs to a higher floor.
 */
export interface PlatformConfig {
  publicUrl: string;
  /** file://PATH or s3://bucket[/prefix] (storage/index.ts opens it). */
  storageUrl: string;
  s3: { endpoint: string | null; region: string | null; accessKeyId: string | null; secretAccessKey: string | null };
  /** Signs the file store's links. Read lazily: `migrate` needs none. */
  secretKey: () => string;
  /** RATE_LIMITS overrides of the named limits (http/rate-limit.ts has the defaults). */
  rateLimits: Partial<Record<LimitName, RateLimit>>;
}

/**
 * The release cache: fresh for `freshMs`, then revalidated with the upstream ETag; on an upstream
 * failure the last good copy is served for up to `staleMs` after the upstream last confirmed it,
 * and the upstream is left alone for `retryMs`. Concurrent misses share one upstream call.
 *
 * Hand-written rather than lru-cache: its fetch() has single-flight and stale-on-rejection, but
 * neither ETag revalidation nor a stale window measured from the last confirmation, and there are
 * only a handful of keys (four components plus the tags the runtime installs;
 * docs/decisions/0009-release-cache.md).
 */
import type { Clock } from '../../platform/clock';
import { sha256Hex } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import type { Logger } from '../../platform/logger';
import type { Release } from './releases.schemas';
import type { SourceResult } from './releases.sources';

export interface CachedRelease {
  release: Release;
  /** Our own strong ETag for the release as we serve it (a hash of its JSON). */
  etag: string;
  /** When the upstream last confirmed this copy. */
  verifiedAt: Date;
  /** True when served because the upstream failed after the copy's freshness ran out. */
  stale: boolean;
}

interface Entry {
  release: Release;
  etag: string;
  upstreamEtag: string | null;
  verifiedAt: number;
}

export interface CacheTimes {
  freshMs: number;
  staleMs: number;
  retryMs: number;
}

export function createReleaseCache(clock: Clock, log: Logger, times: CacheTimes) {
  const entries = new Map<string, Entry>();
  const failures = new Map<string, { retryAt: number; error: AppError }>();
  const inflight = new Map<string, Promise<CachedRelease>>();
  const now = () => clock.now().getTime();

  const view = (e: Entry, stale: boolean): CachedRelease => ({
    release: e.release,
    etag: e.etag,
    verifiedAt: new Date(e.verifiedAt),
    stale,
  });
  const servableStale = (e: Entry | undefined): e is Entry => e !== undefined && now() - e.verifiedAt <= times.staleMs;

  async function refresh(key: string, load: (etag: string | null) => Promise<SourceResult>): Promise<CachedRelease> {
    const held = entries.get(key);
    try {
      const result = await load(held?.upstreamEtag ?? null);
      let entry: Entry;
      if (result.modified) {
        const json = JSON.stringify(result.release);
        entry = { release: result.release, etag: `"${sha256Hex(json).slice(0, 32)}"`, upstreamEtag: result.etag, verifiedAt: now() };
        entries.set(key, entry);
      } else if (held) {
        held.verifiedAt = now();
        entry = held;
      } else {
        throw new AppError('upstream', 'release source answered "not modified" to an unconditional request');
      }
      failures.delete(key);
      return view(entry, false);
    } catch (err) {
      const error = err instanceof AppError ? err : new AppError('upstream', 'release source failed');
      if (!(err instanceof AppError)) log.error({ err, key }, 'unexpected release source error');
      failures.set(key, { retryAt: now() + times.retryMs, error });
      if (servableStale(held)) {
        log.warn({ key, error: error.message, verified_at: new Date(held.verifiedAt).toISOString() }, 'serving stale release');
        return view(held, true);
      }
      throw error;
    }
  }

  return {
    /** The cached release for `key`, calling `load` (once, however many callers wait) when needed. */
    get(key: string, load: (etag: string | null) => Promise<SourceResult>): Promise<CachedRelease> {
      const held = entries.get(key);
      if (held && now() - held.verifiedAt < times.freshMs) return Promise.resolve(view(held, false));
      const failure = failures.get(key);
      if (failure && now() < failure.retryAt) {
        return servableStale(held) ? Promise.resolve(view(held, true)) : Promise.reject(failure.error);
      }
      let pending = inflight.get(key);
      if (!pending) {
        pending = refresh(key, load).finally(() => inflight.delete(key));
        inflight.set(key, pending);
      }
      return pending;
    },

    /** The copy held for `key` without calling the upstream (null when none or too old). */
    peek(key: string): CachedRelease | null {
      const held = entries.get(key);
      return servableStale(held) ? view(held, now() - held.verifiedAt >= times.freshMs) : null;
    },
  };
}

export type ReleaseCache = ReturnType<typeof createReleaseCache>;

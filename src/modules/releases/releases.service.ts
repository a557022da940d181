/**
 * Latest and tagged releases of the four components,
 * from GitHub or the mirror per RELEASE_SOURCE, through the cache. The runtime module installs
 * engines through `byTag`/`latest`.
 */
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { type CachedRelease, createReleaseCache } from './releases.cache';
import { COMPONENTS, type Component, type Release } from './releases.schemas';
import { githubSource, mirrorSource, type ReleaseSource } from './releases.sources';

export interface ReleasesOptions {
  /** Replaces the configured source (tests of the cache alone). */
  source?: ReleaseSource;
  /** How long a copy is served without asking the upstream (default 5 minutes). */
  freshMs?: number;
  /** How long after the upstream last confirmed it a copy may still be served on failure (default 24 h). */
  staleMs?: number;
  /** After a failure, how long the upstream is left alone (default 30 s). */
  retryMs?: number;
  /** Bound on each upstream request, connection to last byte (default 5 s). */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export interface ComponentOverview {
  component: Component;
  release: Release | null;
  error: string | null;
}

const MAX_TAG_LENGTH = 128;

function requireComponent(component: string): asserts component is Component {
  if (!(COMPONENTS as readonly string[]).includes(component)) throw new AppError('invalid', `unknown component "${component}"`);
}

export function createReleasesService(ctx: AppContext, opts: ReleasesOptions = {}) {
  const { config, clock, log } = ctx;
  const sourceOptions = { clock, log, timeoutMs: opts.timeoutMs ?? 5_000, fetch: opts.fetch };
  const source =
    opts.source ?? (config.releaseSource === 'github' ? githubSource(config, sourceOptions) : mirrorSource(config, sourceOptions));
  if (source.kind === 'mirror' && !config.releaseMirrorUrl && !opts.source)
    log.warn('RELEASE_SOURCE is mirror but RELEASE_MIRROR_URL is not set: release endpoints will answer 502');
  const cache = createReleaseCache(clock, log, {
    freshMs: opts.freshMs ?? 5 * 60_000,
    staleMs: opts.staleMs ?? 24 * 3_600_000,
    retryMs: opts.retryMs ?? 30_000,
  });

  const latestKey = (component: Component) => `${component}:latest`;

  async function latestCached(component: Component): Promise<CachedRelease> {
    requireComponent(component);
    return cache.get(latestKey(component), (etag) => source.latest(component, etag));
  }

  return {
    source: source.kind,

    /** The newest release with our ETag for it; AppError('upstream') when none can be had. */
    latestCached,

    async latest(component: Component): Promise<Release> {
      return (await latestCached(component)).release;
    },

    /** One tagged release; AppError('not_found') when the source has no such tag. */
    async byTag(component: Component, tag: string): Promise<Release> {
      requireComponent(component);
      if (tag.length === 0 || tag.length > MAX_TAG_LENGTH || /[\s\0]/.test(tag)) throw new AppError('invalid', 'invalid release tag');
      return (await cache.get(`${component}:tag:${tag}`, (etag) => source.byTag(component, tag, etag))).release;
    },

    /** All four latest releases for the downloads page; a failing component carries its error. */
    async overview(): Promise<ComponentOverview[]> {
      return Promise.all(
        COMPONENTS.map(async (component) => {
          try {
            return { component, release: (await latestCached(component)).release, error: null };
          } catch (err) {
            return { component, release: null, error: err instanceof AppError ? err.message : 'unavailable' };
          }
        }),
      );
    },

    /** Newest publication date among the copies held, without calling any upstream (sitemap lastmod). */
    newestHeldPublication(): Date | null {
      const dates = COMPONENTS.map((c) => cache.peek(latestKey(c))?.release.published_at)
        .filter((d): d is string => d !== undefined)
        .map((d) => new Date(d).getTime());
      return dates.length ? new Date(Math.max(...dates)) : null;
    },
  };
}

export type ReleasesService = ReturnType<typeof createReleasesService>;

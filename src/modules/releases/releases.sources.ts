/**
 * Where releases come from, behind one interface: GitHub's REST API (international site) or a
 * static mirror of JSON files (China site). Every request is conditional on the ETag we hold and
 * bounded by a timeout; every failure becomes AppError('upstream'), never a crash.
 */
import { Value } from '@sinclair/typebox/value';
import type { Static, TSchema } from 'elysia';
import type { Config } from '../../config';
import type { Clock } from '../../platform/clock';
import { AppError } from '../../platform/errors';
import type { Logger } from '../../platform/logger';
import { VERSION } from '../../version';
import { componentAssets } from './releases.assets';
import { type Component, GitHubReleaseSchema, MirrorReleaseSchema, type Release, type ReleaseAsset } from './releases.schemas';

export type SourceResult = { modified: true; release: Release; etag: string | null } | { modified: false };

export interface ReleaseSource {
  readonly kind: 'github' | 'mirror';
  /** The newest release; `etag` is the one stored with our copy (→ `{modified: false}` when unchanged). */
  latest(component: Component, etag: string | null): Promise<SourceResult>;
  /** One tagged release; AppError('not_found') when the source has no such tag. */
  byTag(component: Component, tag: string, etag: string | null): Promise<SourceResult>;
}

export interface SourceOptions {
  clock: Clock;
  log: Logger;
  timeoutMs: number;
  fetch?: typeof fetch;
}

/** Upstream documents larger than this are refused (a GitHub release with 100 assets is ~100 KB). */
const MAX_BODY_CHARS = 4 * 1024 * 1024;

interface Fetched {
  status: number;
  headers: Headers;
  body: unknown;
}

/** GET a JSON document; `label` names the upstream in error messages (never a token). */
async function getJson(url: string, headers: Record<string, string>, label: string, opts: SourceOptions): Promise<Fetched> {
  const doFetch = opts.fetch ?? fetch;
  let res: Response;
  let text: string;
  try {
    res = await doFetch(url, { headers, signal: AbortSignal.timeout(opts.timeoutMs) });
    if (res.status !== 200) {
      await res.body?.cancel();
      return { status: res.status, headers: res.headers, body: null };
    }
    text = await res.text();
  } catch (err) {
    const name = (err as Error)?.name;
    const why = name === 'TimeoutError' || name === 'AbortError' ? `no answer within ${opts.timeoutMs} ms` : 'unreachable';
    opts.log.warn({ upstream: label, err: (err as Error)?.message }, 'release source request failed');
    throw new AppError('upstream', `${label}: ${why}`);
  }
  if (text.length > MAX_BODY_CHARS) throw new AppError('upstream', `${label}: answer too large`);
  try {
    return { status: 200, headers: res.headers, body: JSON.parse(text) };
  } catch {
    throw new AppError('upstream', `${label}: answer is not JSON`);
  }
}

function check<T extends TSchema>(schema: T, body: unknown, label: string): asserts body is Static<T> {
  if (Value.Check(schema, body)) return;
  const first = Value.Errors(schema, body).First();
  throw new AppError('upstream', `${label}: malformed release (${first ? `${first.path || '/'}: ${first.message}` : 'unexpected shape'})`);
}

/** Normalises what both sources share: http(s) URLs only, ISO timestamps, this component's assets. */
function toRelease(component: Component, raw: Static<typeof MirrorReleaseSchema>, label: string): Release {
  const published = new Date(raw.published_at);
  if (Number.isNaN(published.getTime())) throw new AppError('upstream', `${label}: malformed release (published_at is not a timestamp)`);
  const assets = raw.assets.map((a) => {
    if (!/^https?:\/\//i.test(a.url) || !URL.canParse(a.url))
      throw new AppError('upstream', `${label}: malformed release (asset url ${a.name})`);
    const asset: ReleaseAsset = { name: a.name, url: a.url, size: a.size, content_type: a.content_type };
    if (typeof a.digest === 'string' && a.digest !== '') asset.digest = a.digest;
    return asset;
  });
  return {
    tag_name: raw.tag_name,
    name: raw.name || raw.tag_name, // GitHub gives null when a release has no title
    prerelease: raw.prerelease,
    published_at: published.toISOString(),
    assets: componentAssets(component, assets),
  };
}

/** A 404 for "latest" means the repository or its releases are missing: an upstream fault (502). */
function statusError(status: number, label: string, missing: 'upstream' | 'not_found'): AppError {
  if (status === 404) return new AppError(missing, `${label}: not found`);
  if (status === 403 || status === 429) return new AppError('upstream', `${label}: rate limited or forbidden (${status})`);
  return new AppError('upstream', `${label}: answered ${status}`);
}

export function githubSource(config: Pick<Config, 'githubApiUrl' | 'githubToken' | 'releaseRepos'>, opts: SourceOptions): ReleaseSource {
  // While GitHub's rate limit is spent we do not call it (serving stale copies) until it resets.
  let blockedUntil = 0;

  function noteRateLimit(headers: Headers, status: number, label: string) {
    const remaining = headers.get('x-ratelimit-remaining');
    const reset = Number(headers.get('x-ratelimit-reset'));
    const retryAfter = Number(headers.get('retry-after'));
    const now = opts.clock.now().getTime();
    if ((status === 403 || status === 429) && retryAfter > 0) blockedUntil = now + retryAfter * 1000;
    else if (remaining === '0' && reset > 0) blockedUntil = reset * 1000;
    if (remaining !== null && Number(remaining) < 10)
      opts.log.warn(
        { upstream: label, remaining, reset: reset > 0 ? new Date(reset * 1000).toISOString() : undefined },
        'GitHub rate limit nearly spent',
      );
  }

  async function get(component: Component, path: string, etag: string | null, missing: 'upstream' | 'not_found'): Promise<SourceResult> {
    const repo = config.releaseRepos[component];
    const label = `GitHub ${repo}`;
    if (opts.clock.now().getTime() < blockedUntil)
      throw new AppError('upstream', `${label}: rate limited until ${new Date(blockedUntil).toISOString()}`);
    const headers: Record<string, string> = {
      accept: 'application/vnd.github+json',
      'x-github-api-version': '2022-11-28',
      'user-agent': `cpd/${VERSION}`,
    };
    if (config.githubToken) headers.authorization = `Bearer ${config.githubToken}`;
    if (etag) headers['if-none-match'] = etag;
    const res = await getJson(`${config.githubApiUrl}/repos/${repo}${path}`, headers, label, opts);
    noteRateLimit(res.headers, res.status, label);
    if (res.status === 304) return { modified: false };
    if (res.status !== 200) throw statusError(res.status, label, missing);
    check(GitHubReleaseSchema, res.body, label);
    const raw = res.body;
    const release = toRelease(component, { ...raw, assets: raw.assets.map((a) => ({ ...a, url: a.browser_download_url })) }, label);
    return { modified: true, release, etag: res.headers.get('etag') };
  }

  return {
    kind: 'github',
    latest: (component, etag) => get(component, '/releases/latest', etag, 'upstream'),
    byTag: (component, tag, etag) => get(component, `/releases/tags/${encodeURIComponent(tag)}`, etag, 'not_found'),
  };
}

/** RELEASE_MIRROR_URL/{component}/latest.json and /{component}/{tag}.json, in the release shape. */
export function mirrorSource(config: Pick<Config, 'releaseMirrorUrl'>, opts: SourceOptions): ReleaseSource {
  async function get(component: Component, file: string, etag: string | null, missing: 'upstream' | 'not_found'): Promise<SourceResult> {
    const label = `mirror ${component}/${file}`;
    if (!config.releaseMirrorUrl) throw new AppError('upstream', 'release mirror is not configured (RELEASE_MIRROR_URL)');
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': `cpd/${VERSION}` };
    if (etag) headers['if-none-match'] = etag;
    const res = await getJson(`${config.releaseMirrorUrl}/${component}/${encodeURIComponent(file)}`, headers, label, opts);
    if (res.status === 304) return { modified: false };
    if (res.status !== 200) throw statusError(res.status, label, missing);
    check(MirrorReleaseSchema, res.body, label);
    return { modified: true, release: toRelease(component, res.body, label), etag: res.headers.get('etag') };
  }
  return {
    kind: 'mirror',
    latest: (component, etag) => get(component, 'latest.json', etag, 'upstream'),
    byTag: (component, tag, etag) => get(component, `${tag}.json`, etag, 'not_found'),
  };
}

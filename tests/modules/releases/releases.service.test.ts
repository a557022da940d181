/**
 * The releases service against a fake GitHub and a fake mirror: every upstream fault
 * (down, slow, malformed, rate limited, not found), stale copies, single-flight, conditional requests, tags.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { loadConfig } from '../../../src/config';
import { createReleasesService, type ReleasesOptions } from '../../../src/modules/releases';
import type { AppContext } from '../../../src/app-context';
import { AppError } from '../../../src/platform/errors';
import { createLogger } from '../../../src/platform/logger';
import { createMetricsRegistry } from '../../../src/platform/metrics/registry';
import { type FakeGitHub, type FakeMirror, startFakeGitHub, startFakeMirror } from '../../support/fake-github';
import { allRepos, engineRelease } from './fixtures';
import { HOUR, MINUTE, manualClock } from '../../support/clock';

/** The releases module holds no tables, so its context needs no database. */
function releasesContext(env: Record<string, string>, clock = manualClock(Date.parse('2026-04-01T00:00:00Z'))) {
  const ctx: AppContext = {
    config: loadConfig({ DATA_DIR: '/nonexistent', ...env }),
    database: undefined as never,
    log: createLogger('silent'),
    clock,
    metrics: createMetricsRegistry(),
    onShutdown: () => {},
  };
  return { ctx, clock };
}

async function upstreamFailure(promise: Promise<unknown>): Promise<AppError> {
  const err = await promise.then(
    () => null,
    (e) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  return err as AppError;
}

let gh: FakeGitHub;
const latestCalls = (component: string) => gh.requests.filter((r) => r.path === `/repos/ariacompute/${component}/releases/latest`).length;

beforeAll(() => {
  gh = startFakeGitHub({ releases: allRepos() });
});
afterAll(() => gh.stop());
beforeEach(() => {
  gh.override = null;
  gh.releases = allRepos();
  gh.requests.length = 0;
});

function githubService(opts: ReleasesOptions = {}, env: Record<string, string> = {}) {
  const { ctx, clock } = releasesContext({ GITHUB_API_URL: gh.url, ...env });
  return { releases: createReleasesService(ctx, { timeoutMs: 2_000, ...opts }), clock };
}

describe('upstream faults: 502 on a cold cache, the stale copy on a warm one, never a crash', () => {
  const faults: Array<[string, () => Response | Promise<Response>, RegExp]> = [
    ['non-JSON answer', () => new Response('<html>maintenance</html>', { headers: { 'content-type': 'text/html' } }), /not JSON/],
    [
      'a missing field',
      () => Response.json({ tag_name: 'v9', name: 'x', prerelease: false, assets: [] }),
      /malformed release \(\/published_at/,
    ],
    [
      'an asset missing its size',
      () =>
        Response.json({
          ...ghShape(),
          assets: [{ name: 'aria-engine_1_macos.tar.gz', browser_download_url: 'https://x/y', content_type: 'a/b' }],
        }),
      /malformed release/,
    ],
    ['a timestamp that is not one', () => Response.json({ ...ghShape(), published_at: 'yesterday' }), /published_at is not a timestamp/],
    [
      'a non-http asset URL',
      () =>
        Response.json({ ...ghShape(), assets: [{ name: 'a', browser_download_url: 'javascript:alert(1)', size: 1, content_type: 'a/b' }] }),
      /asset url/,
    ],
    ['JSON that is not an object', () => Response.json([1, 2, 3]), /malformed release/],
    ['404 for the repository', () => Response.json({ message: 'Not Found' }, { status: 404 }), /not found/],
    ['500', () => new Response('oops', { status: 500 }), /answered 500/],
    ['403 (rate limit or forbidden)', () => Response.json({ message: 'Forbidden' }, { status: 403 }), /rate limited or forbidden \(403\)/],
    ['429', () => Response.json({ message: 'slow down' }, { status: 429 }), /rate limited or forbidden \(429\)/],
    ['a hang past the timeout', () => gh.hang(), /no answer within 200 ms/],
    [
      'a body that stops half way',
      () =>
        new Response(new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode('{"tag_name":')) }), {
          headers: { 'content-type': 'application/json' },
        }),
      /no answer within 200 ms/,
    ],
  ];

  for (const [what, answer, message] of faults) {
    test(what, async () => {
      // Only the hangs wait the timeout out; the others keep the default 2 s, so a loaded machine
      // (test files run in parallel) cannot turn their slow answer into "no answer within 200 ms".
      const hangs = message.source.includes('no answer');
      const { releases, clock } = githubService(hangs ? { timeoutMs: 200 } : {});
      gh.override = (_req, path) => (path.endsWith('/releases/latest') ? answer() : undefined);
      const cold = await upstreamFailure(releases.latest('engine'));
      expect(cold.kind).toBe('upstream');
      expect(cold.message).toMatch(message);

      gh.override = null;
      clock.advance(MINUTE); // past the retry pause after the failure
      const good = await releases.latest('engine');
      clock.advance(10 * MINUTE);
      gh.override = (_req, path) => (path.endsWith('/releases/latest') ? answer() : undefined);
      expect(await releases.latest('engine')).toEqual(good);
    });
  }

  test('connection refused', async () => {
    const dead = startFakeGitHub({ releases: {} });
    const url = dead.url;
    await dead.stop();
    const { ctx } = releasesContext({ GITHUB_API_URL: url });
    const err = await upstreamFailure(createReleasesService(ctx).latest('router'));
    expect(err.kind).toBe('upstream');
    expect(err.message).toBe('GitHub ariacompute/router: unreachable');
  });

  test('after a failure the upstream is left alone for the retry pause, then asked again', async () => {
    const { releases, clock } = githubService();
    gh.override = () => new Response('down', { status: 502 });
    await upstreamFailure(releases.latest('memo'));
    await upstreamFailure(releases.latest('memo'));
    expect(latestCalls('memo')).toBe(1);
    gh.override = null;
    clock.advance(31_000);
    expect((await releases.latest('memo')).tag_name).toBe('v0.1.0');
    expect(latestCalls('memo')).toBe(2);
  });
});

function ghShape() {
  return { tag_name: 'v9.0.0', name: 'nine', prerelease: false, published_at: '2026-01-01T00:00:00Z', assets: [] as unknown[] };
}

describe('cache', () => {
  test('100 concurrent requests on a cold cache make one upstream call, and so do 100 after expiry', async () => {
    const { releases, clock } = githubService();
    const results = await Promise.all(Array.from({ length: 100 }, () => releases.latest('engine')));
    expect(latestCalls('engine')).toBe(1);
    expect(new Set(results.map((r) => r.tag_name))).toEqual(new Set(['v1.4.0']));
    clock.advance(5 * MINUTE);
    await Promise.all(Array.from({ length: 100 }, () => releases.latest('engine')));
    expect(latestCalls('engine')).toBe(2);
  });

  test('100 concurrent requests while the upstream is down make one call and all get the 502 error', async () => {
    const { releases } = githubService();
    gh.override = () => new Response('down', { status: 503 });
    const outcomes = await Promise.allSettled(Array.from({ length: 100 }, () => releases.latest('agent')));
    expect(outcomes.every((o) => o.status === 'rejected' && (o.reason as AppError).kind === 'upstream')).toBe(true);
    expect(latestCalls('agent')).toBe(1);
  });

  test('revalidation sends the stored ETag; a 304 keeps the copy and renews its freshness', async () => {
    const { releases, clock } = githubService();
    const first = await releases.latestCached('router');
    clock.advance(6 * MINUTE);
    const second = await releases.latestCached('router');
    const [, conditional] = gh.requests.filter((r) => r.path.endsWith('/router/releases/latest'));
    expect(conditional!.headers['if-none-match']).toMatch(/^"[0-9a-f]{40}"$/);
    expect(second.release).toEqual(first.release);
    expect(second.etag).toBe(first.etag);
    expect(second.verifiedAt.getTime()).toBe(first.verifiedAt.getTime() + 6 * MINUTE);
    clock.advance(4 * MINUTE);
    await releases.latest('router');
    expect(latestCalls('router')).toBe(2);
  });

  test('the stale window counts from the last confirmation by the upstream', async () => {
    const { releases, clock } = githubService();
    await releases.latest('engine');
    clock.advance(20 * HOUR);
    await releases.latest('engine'); // confirmed again (304)
    gh.override = () => new Response('down', { status: 500 });
    clock.advance(20 * HOUR);
    const stale = await releases.latestCached('engine');
    expect(stale.stale).toBe(true);
    expect(stale.release.tag_name).toBe('v1.4.0');
    clock.advance(4 * HOUR + 1);
    expect((await upstreamFailure(releases.latest('engine'))).kind).toBe('upstream');
  });

  test('TTLs are options', async () => {
    const { releases, clock } = githubService({ freshMs: 1_000, staleMs: 2_000, retryMs: 10 });
    await releases.latest('memo');
    clock.advance(1_000);
    await releases.latest('memo');
    expect(latestCalls('memo')).toBe(2);
    gh.override = () => new Response('down', { status: 500 });
    clock.advance(1_500);
    expect((await releases.latestCached('memo')).stale).toBe(true);
    clock.advance(1_000);
    expect((await upstreamFailure(releases.latest('memo'))).kind).toBe('upstream');
  });

  test('the sitemap date comes from copies held, without calling the upstream', async () => {
    const { releases } = githubService();
    expect(releases.newestHeldPublication()).toBeNull();
    await releases.latest('router');
    await releases.latest('engine');
    expect(releases.newestHeldPublication()?.toISOString()).toBe('2026-03-01T10:00:00.000Z');
    expect(gh.requests).toHaveLength(2);
  });
});

describe('GitHub specifics', () => {
  test('GITHUB_TOKEN is sent as a bearer token, and never appears in an error', async () => {
    const { releases } = githubService({}, { GITHUB_TOKEN: 'ghp_secret123' });
    await releases.latest('agent');
    expect(gh.requests.at(-1)!.headers.authorization).toBe('Bearer ghp_secret123');
    gh.override = () => new Response('bad credentials', { status: 401 });
    const err = await upstreamFailure(releases.latest('memo'));
    expect(err.message).not.toContain('ghp_secret123');
  });

  test('RELEASE_REPOS picks the repository', async () => {
    gh.releases['someone/fork'] = { latest: { ...engineRelease(), tag_name: 'v7.0.0' } };
    const { releases } = githubService({}, { RELEASE_REPOS: 'engine=someone/fork' });
    expect((await releases.latest('engine')).tag_name).toBe('v7.0.0');
  });

  test('a spent rate limit stops calls until its reset time, then GitHub is asked again', async () => {
    const { releases, clock } = githubService({ retryMs: 1 });
    const reset = Math.floor(clock.now().getTime() / 1000) + 600;
    gh.override = () =>
      Response.json(
        { message: 'API rate limit exceeded' },
        { status: 403, headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) } },
      );
    await upstreamFailure(releases.latest('router'));
    gh.override = null;
    clock.advance(5 * MINUTE);
    const err = await upstreamFailure(releases.latest('router'));
    expect(err.message).toMatch(/rate limited until/);
    expect(latestCalls('router')).toBe(1);
    clock.advance(5 * MINUTE + 1);
    expect((await releases.latest('router')).tag_name).toBe('v0.3.1');
  });

  test('Retry-After on a 429 is honoured', async () => {
    const { releases, clock } = githubService({ retryMs: 1 });
    gh.override = () => Response.json({ message: 'secondary rate limit' }, { status: 429, headers: { 'retry-after': '120' } });
    await upstreamFailure(releases.latest('agent'));
    gh.override = null;
    clock.advance(MINUTE);
    expect((await upstreamFailure(releases.latest('agent'))).message).toMatch(/rate limited until/);
    clock.advance(MINUTE + 1);
    expect((await releases.latest('agent')).tag_name).toBe('v2.0.0');
  });

  test('byTag reads /releases/tags/{tag}; an unknown tag is not_found; a bad tag is invalid', async () => {
    gh.releases['ariacompute/engine']!.byTag = {
      'v1.0.0': { ...engineRelease(), tag_name: 'v1.0.0', assets: [{ name: 'engine_1.0.0_macos.tar.gz' }] },
    };
    const { releases } = githubService();
    const old = await releases.byTag('engine', 'v1.0.0');
    expect(old.tag_name).toBe('v1.0.0');
    expect(old.assets.map((a) => a.name)).toEqual(['engine_1.0.0_macos.tar.gz']);
    expect(gh.requests.at(-1)!.path).toBe('/repos/ariacompute/engine/releases/tags/v1.0.0');
    expect((await upstreamFailure(releases.byTag('engine', 'v0.0.1'))).kind).toBe('not_found');
    expect((await upstreamFailure(releases.byTag('engine', ''))).kind).toBe('invalid');
    expect((await upstreamFailure(releases.byTag('nope' as never, 'v1'))).kind).toBe('invalid');
  });

  test('asset bytes and their digest come from the fake, for the runtime tests', async () => {
    const bytes = new TextEncoder().encode('pretend tarball');
    const path = '/ariacompute/engine/releases/download/v1.4.0/aria-engine_1.4.0_linux_x86_64.tar.gz';
    gh.releases['ariacompute/engine']!.latest = { tag_name: 'v1.4.0', assets: [{ name: 'aria-engine_1.4.0_linux_x86_64.tar.gz' }] };
    gh.assets[path] = bytes;
    const { releases } = githubService();
    const [asset] = (await releases.latest('engine')).assets;
    expect(asset!.size).toBe(bytes.length);
    expect(asset!.digest).toBe(`sha256:${new Bun.CryptoHasher('sha256').update(bytes).digest('hex')}`);
    const download = await fetch(asset!.url);
    expect(new Uint8Array(await download.arrayBuffer())).toEqual(bytes);
  });
});

describe('mirror source', () => {
  let mirror: FakeMirror;
  const doc = (tag: string) => ({
    tag_name: tag,
    name: null,
    prerelease: false,
    published_at: '2026-03-05T00:00:00+08:00',
    assets: [
      {
        name: `memo_${tag.slice(1)}_linux_arm64.tar.gz`,
        url: 'https://mirror.example.cn/m.tar.gz',
        size: 5,
        content_type: 'application/gzip',
        digest: null,
      },
      { name: 'README.txt', url: 'https://mirror.example.cn/r.txt', size: 5, content_type: 'text/plain' },
    ],
  });
  beforeAll(() => {
    mirror = startFakeMirror({ files: { memo: { 'latest.json': doc('v0.2.0'), 'v0.1.0.json': doc('v0.1.0') } } });
  });
  afterAll(() => mirror.stop());

  test('SITE=cn reads the mirror by default, normalising time and dropping null digests', async () => {
    const { ctx } = releasesContext({ SITE: 'cn', RELEASE_MIRROR_URL: `${mirror.url}/`, GITHUB_API_URL: gh.url });
    const releases = createReleasesService(ctx);
    expect(releases.source).toBe('mirror');
    expect(await releases.latest('memo')).toEqual({
      tag_name: 'v0.2.0',
      name: 'v0.2.0',
      prerelease: false,
      published_at: '2026-03-04T16:00:00.000Z',
      assets: [
        { name: 'memo_0.2.0_linux_arm64.tar.gz', url: 'https://mirror.example.cn/m.tar.gz', size: 5, content_type: 'application/gzip' },
      ],
    });
    expect((await releases.byTag('memo', 'v0.1.0')).tag_name).toBe('v0.1.0');
    expect((await upstreamFailure(releases.byTag('memo', 'v9.9.9'))).kind).toBe('not_found');
  });

  test('revalidates with the mirror ETag too', async () => {
    const { ctx, clock } = releasesContext({ SITE: 'cn', RELEASE_MIRROR_URL: mirror.url });
    const releases = createReleasesService(ctx);
    await releases.latest('memo');
    clock.advance(6 * MINUTE);
    await releases.latest('memo');
    expect(mirror.requests.at(-1)!.headers['if-none-match']).toMatch(/^"/);
  });

  test('RELEASE_SOURCE overrides the site default both ways', () => {
    expect(createReleasesService(releasesContext({ SITE: 'cn', RELEASE_SOURCE: 'github' }).ctx).source).toBe('github');
    expect(
      createReleasesService(releasesContext({ SITE: 'intl', RELEASE_SOURCE: 'mirror', RELEASE_MIRROR_URL: mirror.url }).ctx).source,
    ).toBe('mirror');
  });

  test('an unset RELEASE_MIRROR_URL is an upstream error, not a crash', async () => {
    const releases = createReleasesService(releasesContext({ SITE: 'cn' }).ctx);
    const err = await upstreamFailure(releases.latest('engine'));
    expect(err.kind).toBe('upstream');
    expect(err.message).toMatch(/RELEASE_MIRROR_URL/);
  });
});

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { type FakeGitHub, type FakeMirror, startFakeGitHub, startFakeMirror } from '../../support/fake-github';
import { ENGINE_WANTED, allRepos, engineRelease } from './fixtures';
import { HOUR, MINUTE, manualClock } from '../../support/clock';

const RELEASE_KEYS = ['assets', 'name', 'prerelease', 'published_at', 'tag_name'];

describe('release endpoints from GitHub (intl)', () => {
  let gh: FakeGitHub;
  let t: TestApp;
  const clock = manualClock(Date.parse('2026-04-01T00:00:00Z'));
  const latestCalls = (repo: string) => gh.requests.filter((r) => r.path === `/repos/${repo}/releases/latest`).length;

  beforeAll(async () => {
    gh = startFakeGitHub({ releases: allRepos() });
    gh.releases['ariacompute/engine']!.latest!.assets![0]!.digest = `sha256:${'ab'.repeat(32)}`;
    t = await createTestApp('postgres', { GITHUB_API_URL: gh.url }, { clock });
  });
  afterAll(async () => {
    await t.close();
    await gh.stop();
  });

  test('each endpoint answers exactly the release fields, no auth needed, only its own assets', async () => {
    const engine = await t.request('GET', '/api/download/engine-latest');
    expect(engine.status).toBe(200);
    expect(Object.keys(engine.body).sort()).toEqual(RELEASE_KEYS);
    expect(engine.body).toMatchObject({
      tag_name: 'v1.4.0',
      name: 'Engine 1.4.0',
      prerelease: false,
      published_at: '2026-03-01T10:00:00.000Z',
    });
    expect(engine.body.assets.map((a: { name: string }) => a.name).sort()).toEqual([...ENGINE_WANTED].sort());
    const [first] = engine.body.assets;
    expect(first).toEqual({
      name: ENGINE_WANTED[0],
      url: `${gh.url}/ariacompute/engine/releases/download/v1.4.0/${ENGINE_WANTED[0]}`,
      size: 1000 + ENGINE_WANTED[0]!.length,
      content_type: 'application/gzip',
      digest: `sha256:${'ab'.repeat(32)}`,
    });
    // GitHub gave no digest for the others: the key is absent, not null.
    expect(engine.body.assets[1]).not.toHaveProperty('digest');

    const router = await t.request('GET', '/api/download/router-latest');
    expect(router.body).toMatchObject({ tag_name: 'v0.3.1', name: 'v0.3.1', prerelease: true });
    expect(router.body.assets).toHaveLength(8);
    expect(
      router.body.assets.every((a: { name: string }) => /^(aria-router|libaria-router_ffi)_0\.3\.1_[a-z0-9_]+\.tar\.gz$/.test(a.name)),
    ).toBe(true);

    const agent = await t.request('GET', '/api/download/agent-latest');
    expect(agent.body.assets.map((a: { name: string }) => a.name)).toEqual([
      'agent-cloud_2.0.0_linux_x86_64',
      'agent-cloud_2.0.0_linux_arm64',
      'agent-cloud_2.0.0_macos',
      'agent-cloud_2.0.0_windows_x86_64.exe',
    ]);
    const memo = await t.request('GET', '/api/download/memo-latest');
    expect(memo.body.assets.map((a: { name: string }) => a.name)).toEqual([
      'memo_0.1.0_linux_x86_64.tar.gz',
      'memo_0.1.0_linux_arm64.tar.gz',
      'memo_0.1.0_macos.tar.gz',
      'memo_0.1.0_windows_x86_64.tar.gz',
    ]);
  });

  test('GitHub is asked politely: User-Agent, the GitHub media type, no token when none is configured', async () => {
    const call = gh.requests.find((r) => r.path === '/repos/ariacompute/engine/releases/latest')!;
    expect(call.headers['user-agent']).toMatch(/^cpd\//);
    expect(call.headers.accept).toBe('application/vnd.github+json');
    expect(call.headers.authorization).toBeUndefined();
  });

  test('a client holding the current ETag gets 304; another ETag gets the body', async () => {
    const first = await t.request('GET', '/api/download/engine-latest');
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[0-9a-f]+"$/);
    const again = await t.request('GET', '/api/download/engine-latest', { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expect(again.headers.get('etag')).toBe(etag);
    expect(again.headers.get('x-request-id')).toBeTruthy();
    expect(first.headers.get('x-request-id')).toBeTruthy();
    expect(first.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const weakInList = await t.request('GET', '/api/download/engine-latest', { headers: { 'if-none-match': `"other", W/${etag}` } });
    expect(weakInList.status).toBe(304);
    const other = await t.request('GET', '/api/download/engine-latest', { headers: { 'if-none-match': '"something-else"' } });
    expect(other.status).toBe(200);
    expect(other.body.tag_name).toBe('v1.4.0');
  });

  test('within the TTL GitHub is not asked again; after it, the request is conditional and a 304 keeps our copy', async () => {
    const before = latestCalls('ariacompute/engine');
    await t.request('GET', '/api/download/engine-latest');
    expect(latestCalls('ariacompute/engine')).toBe(before);

    clock.advance(5 * MINUTE + 1);
    const res = await t.request('GET', '/api/download/engine-latest');
    expect(res.status).toBe(200);
    expect(res.body.tag_name).toBe('v1.4.0');
    expect(latestCalls('ariacompute/engine')).toBe(before + 1);
    const conditional = gh.requests.filter((r) => r.path === '/repos/ariacompute/engine/releases/latest').at(-1)!;
    expect(conditional.headers['if-none-match']).toMatch(/^"[0-9a-f]+"$/);
  });

  test('a new upstream release shows after the TTL, with a new ETag', async () => {
    const old = await t.request('GET', '/api/download/engine-latest');
    gh.releases['ariacompute/engine']!.latest = { ...engineRelease(), tag_name: 'v1.5.0', name: 'Engine 1.5.0' };
    expect((await t.request('GET', '/api/download/engine-latest')).body.tag_name).toBe('v1.4.0');
    clock.advance(5 * MINUTE + 1);
    const fresh = await t.request('GET', '/api/download/engine-latest', { headers: { 'if-none-match': old.headers.get('etag')! } });
    expect(fresh.status).toBe(200);
    expect(fresh.body.tag_name).toBe('v1.5.0');
    expect(fresh.headers.get('etag')).not.toBe(old.headers.get('etag'));
  });

  test('when GitHub fails the last copy is served for up to 24 hours, then 502', async () => {
    await t.request('GET', '/api/download/agent-latest');
    gh.override = (_req, path) => (path.includes('/agent/') ? new Response('boom', { status: 500 }) : undefined);
    try {
      clock.advance(6 * MINUTE);
      const stale = await t.request('GET', '/api/download/agent-latest');
      expect(stale.status).toBe(200);
      expect(stale.body.tag_name).toBe('v2.0.0');
      clock.advance(23 * HOUR);
      expect((await t.request('GET', '/api/download/agent-latest')).status).toBe(200);
      clock.advance(HOUR + 1);
      const gone = await t.request('GET', '/api/download/agent-latest');
      expect(gone.status).toBe(502);
      expect(gone.body).toEqual({ error: expect.stringContaining('GitHub ariacompute/agent') });
    } finally {
      gh.override = null;
    }
    clock.advance(MINUTE); // past the retry pause: GitHub is asked again and has recovered
    expect((await t.request('GET', '/api/download/agent-latest')).status).toBe(200);
  });

  test('/downloads lists the four components with tag, date and asset links; a failing one says so', async () => {
    clock.advance(10 * MINUTE);
    gh.override = (_req, path) => (path.includes('/memo/') ? new Response('no', { status: 503 }) : undefined);
    try {
      // memo may still be cached from the first test: move past its stale window so it is truly down.
      clock.advance(25 * HOUR);
      const res = await t.request('GET', '/downloads');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/html');
      expect(res.text).toContain('v1.5.0');
      expect(res.text).toContain('v0.3.1');
      expect(res.text).toContain('v2.0.0');
      expect(res.text).toContain('2026-03-01');
      expect(res.text).toContain(`href="${gh.url}/ariacompute/engine/releases/download/v1.5.0/${ENGINE_WANTED[1]}"`);
      expect(res.text).toMatch(/Memo<\/h2><p class="unavailable">Release information is unavailable/);
    } finally {
      gh.override = null;
    }
  });

  test('the sitemap lists /downloads', async () => {
    const res = await t.request('GET', '/sitemap.xml');
    expect(res.text).toContain('<loc>http://localhost:8080/downloads</loc>');
  });
});

describe('release endpoints on the China site (mirror)', () => {
  let mirror: FakeMirror;
  let t: TestApp;

  beforeAll(async () => {
    const doc = (tag: string, names: string[]) => ({
      tag_name: tag,
      name: `Release ${tag}`,
      prerelease: false,
      published_at: '2026-03-02T00:00:00Z',
      assets: names.map((name) => ({
        name,
        url: `https://mirror.example.cn/${name}`,
        size: 10,
        content_type: 'application/gzip',
        digest: `sha256:${'cd'.repeat(32)}`,
      })),
    });
    mirror = startFakeMirror({
      files: {
        engine: {
          'latest.json': doc('v1.4.0', ['engine_1.4.0_linux_x86_64.tar.gz', 'libaria_ffi_1.4.0_linux_x86_64.tar.gz', 'SHA256SUMS']),
        },
        router: { 'latest.json': doc('v0.3.1', ['aria-router_0.3.1_macos.tar.gz']) },
      },
    });
    t = await createTestApp('postgres', { SITE: 'cn', RELEASE_MIRROR_URL: mirror.url, GITHUB_API_URL: 'http://127.0.0.1:9' });
  });
  afterAll(async () => {
    await t.close();
    await mirror.stop();
  });

  test('reads {component}/latest.json from the mirror, filtered, with mirror URLs', async () => {
    const res = await t.request('GET', '/api/download/engine-latest');
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(RELEASE_KEYS);
    expect(res.body.assets).toEqual([
      {
        name: 'engine_1.4.0_linux_x86_64.tar.gz',
        url: 'https://mirror.example.cn/engine_1.4.0_linux_x86_64.tar.gz',
        size: 10,
        content_type: 'application/gzip',
        digest: `sha256:${'cd'.repeat(32)}`,
      },
      {
        name: 'libaria_ffi_1.4.0_linux_x86_64.tar.gz',
        url: 'https://mirror.example.cn/libaria_ffi_1.4.0_linux_x86_64.tar.gz',
        size: 10,
        content_type: 'application/gzip',
        digest: `sha256:${'cd'.repeat(32)}`,
      },
    ]);
    expect(mirror.requests.map((r) => r.path)).toContain('/engine/latest.json');
  });

  test('100 concurrent requests on a cold cache make one mirror request and all get the release', async () => {
    const answers = await Promise.all(Array.from({ length: 100 }, () => t.request('GET', '/api/download/router-latest')));
    expect(answers.every((a) => a.status === 200 && a.body.tag_name === 'v0.3.1')).toBe(true);
    expect(new Set(answers.map((a) => a.headers.get('etag'))).size).toBe(1);
    expect(mirror.requests.filter((r) => r.path === '/router/latest.json')).toHaveLength(1);
  });

  test('a component missing from the mirror is a 502 on a cold cache', async () => {
    const res = await t.request('GET', '/api/download/memo-latest');
    expect(res.status).toBe(502);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(res.body).toEqual({ error: expect.stringContaining('mirror memo/latest.json') });
  });
});

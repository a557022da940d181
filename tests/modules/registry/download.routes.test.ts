import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS, type TestDatabase } from '../../support/db';
import { createProxiedTestDatabase, type TcpProxy } from '../../support/tcp-proxy';
import { makeApiKey, makeUser } from '../../support/make';
import { bundleFiles, makeBundle, publish, unzip } from './support';
import { manualClock } from '../../support/clock';

for (const kind of DB_KINDS) {
  describe(`model downloads (${kind})`, () => {
    let t: TestApp;
    const clock = manualClock();
    let user: Awaited<ReturnType<typeof makeUser>>;
    let key: { id: string; key: string };
    let bundle: string;
    const files = bundleFiles(7);
    const single = join(tmpdir(), `cpd-single-${process.pid}-${kind}.gguf`);
    const singleBytes = new TextEncoder().encode('GGUF single-file model bytes '.repeat(100));

    const raw = (url: string, init: RequestInit = {}) => t.app.handle(new Request(url.startsWith('http') ? url : `http://localhost${url}`, init));
    const bearer = (token: string, extra: Record<string, string> = {}) => ({ headers: { authorization: `Bearer ${token}`, ...extra } });

    beforeAll(async () => {
      t = await createTestApp(kind, { RATE_LIMITS: 'download=1000/1m' }, { clock });
      user = await makeUser(t);
      key = await makeApiKey(t, user.id);
      bundle = makeBundle(files);
      writeFileSync(single, singleBytes);
      for (const sdk of ['v1.0', 'v1.2', 'v2.0']) await publish(t, { path: bundle, slug: 'demo', quant: 'int4', sdk });
      await publish(t, { path: bundle, slug: 'demo', quant: 'int8', sdk: 'v1.0' });
      await publish(t, { path: single, slug: 'tiny', quant: 'int8', sdk: 'v1.0' });
    });
    afterAll(async () => {
      await t.close();
      rmSync(bundle, { recursive: true, force: true });
      rmSync(single, { force: true });
    });

    test('401 without a credential, with a bad key, a bad session, or a key in the query', async () => {
      const path = '/api/models/demo/download?quant=int4&sdk=v1.0';
      expect((await raw(path)).status).toBe(401);
      expect((await raw('/api/models/demo/download?quant=bad')).status).toBe(401); // the credential is checked first
      expect((await raw(path, bearer('bfvk-notakey'))).status).toBe(401);
      expect((await raw(path, bearer('not-a-session'))).status).toBe(401);
      const res = await raw(`${path}&token=${key.key}`);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: expect.any(String) });
    });

    test('session bearer, query token and API key are all accepted', async () => {
      const path = '/api/models/demo/download?quant=int4&sdk=v1.0&format=json';
      expect((await raw(path, bearer(user.token))).status).toBe(200);
      expect((await raw(`${path}&token=${encodeURIComponent(user.token)}`)).status).toBe(200);
      expect((await raw(path, bearer(key.key))).status).toBe(200);
      expect((await raw(path, { headers: { cookie: `cpd_session=${user.token}` } })).status).toBe(200);
    });

    test('a revoked key is refused at once', async () => {
      const other = await makeApiKey(t, user.id, 'short-lived');
      const path = '/api/models/demo/download?quant=int4&sdk=v1.0&format=json';
      expect((await raw(path, bearer(other.key))).status).toBe(200);
      expect((await t.request('DELETE', `/api/api-keys/${other.id}`, { token: user.token })).status).toBe(204);
      expect((await raw(path, bearer(other.key))).status).toBe(401);
    });

    test.each([
      ['missing quant', '?sdk=v1.0'],
      ['missing sdk', '?quant=int4'],
      ['unknown quant', '?quant=int3&sdk=v1.0'],
      ['malformed sdk', '?quant=int4&sdk=1.0'],
      ['sdk with a patch', '?quant=int4&sdk=v1.0.1'],
      ['sdk with letters', '?quant=int4&sdk=vX.Y'],
    ])('400 for %s', async (_name, query) => {
      const res = await raw(`/api/models/demo/download${query}`, bearer(key.key));
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: expect.any(String) });
    });

    test('unknown query fields are ignored', async () => {
      const res = await raw('/api/models/demo/download?quant=int4&sdk=v1.0&format=json&utm_source=x&foo[]=1', bearer(key.key));
      expect(res.status).toBe(200);
    });

    test.each([
      ['unknown slug', '/api/models/nope/download?quant=int4&sdk=v1.0'],
      ['quant not published', '/api/models/demo/download?quant=int326&sdk=v1.0'],
      ['sdk older than any', '/api/models/demo/download?quant=int4&sdk=v0.9'],
      ['sdk major not published', '/api/models/demo/download?quant=int4&sdk=v3.0'],
      ['int8 only exists for v1.0, not v2', '/api/models/demo/download?quant=int8&sdk=v2.5'],
    ])('404 for %s', async (_name, path) => {
      const res = await raw(path, bearer(key.key));
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: expect.any(String) });
    });

    test.each([
      ['v1.0', 'v1.0'],
      ['v1.1', 'v1.0'],
      ['v1.2', 'v1.2'],
      ['v1.9', 'v1.2'],
      ['v2.0', 'v2.0'],
      ['v2.7', 'v2.0'],
    ])('sdk %s resolves to %s', async (asked, served) => {
      const res = await raw(`/api/models/demo/download?quant=int4&sdk=${asked}&format=json`, bearer(key.key));
      expect(((await res.json()) as { filename: string }).filename).toBe(`demo-int4-${served}.zip`);
    });

    test('a directory answers a complete ZIP stream with its headers', async () => {
      const res = await raw('/api/models/demo/download?quant=int4&sdk=v1.2', bearer(key.key));
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/zip');
      expect(res.headers.get('content-disposition')).toContain('attachment; filename="demo-int4-v1.2.zip"');
      expect(res.headers.get('accept-ranges')).toBe('bytes');
      const body = new Uint8Array(await res.arrayBuffer());
      expect(Number(res.headers.get('content-length'))).toBe(body.length);
      expect(res.headers.get('etag')).toMatch(/^"[0-9a-f]{64}"$/);
      expect(res.headers.get('x-linked-etag')).toBe(res.headers.get('etag'));
      expect(res.headers.get('x-linked-size')).toBe(String(body.length));

      const zipPath = join(tmpdir(), `cpd-dl-${process.pid}-${kind}.zip`);
      const out = `${zipPath}.d`;
      try {
        writeFileSync(zipPath, body);
        expect(unzip(['-t', zipPath]).out).toContain('No errors detected');
        expect(unzip(['-q', zipPath, '-d', out]).code).toBe(0);
        for (const [name, content] of Object.entries(files)) {
          const expected = typeof content === 'string' ? Buffer.from(content) : Buffer.from(content);
          expect(Buffer.from(await Bun.file(join(out, name)).arrayBuffer()).equals(expected)).toBe(true);
        }
      } finally {
        rmSync(zipPath, { force: true });
        rmSync(out, { recursive: true, force: true });
      }
    });

    test('HEAD answers the same headers and no body', async () => {
      const path = '/api/models/demo/download?quant=int4&sdk=v1.2';
      const get = await raw(path, bearer(key.key));
      await get.arrayBuffer();
      const head = await raw(path, { method: 'HEAD', ...bearer(key.key) });
      expect(head.status).toBe(200);
      for (const h of ['content-length', 'content-type', 'content-disposition', 'accept-ranges', 'etag', 'x-linked-size', 'x-linked-etag'])
        expect(head.headers.get(h)).toBe(get.headers.get(h));
      expect((await head.arrayBuffer()).byteLength).toBe(0);
    });

    test('HEAD errors have the same statuses and {error} bodies as GET', async () => {
      const cases: Array<[string, RequestInit, number]> = [
        ['/api/models/demo/download?quant=int4&sdk=v1.2', {}, 401],
        ['/api/models/demo/download?quant=bad&sdk=v1.2', bearer(key.key), 400],
        ['/api/models/nope/download?quant=int4&sdk=v1.2', bearer(key.key), 404],
        ['/api/models/%E0%A4%A/download?quant=int4&sdk=v1.2', bearer(key.key), 404],
        ['/api/models/demo/zip?artifact=x&expires=9999999999&signature=00', {}, 403],
        ['/api/storage/sha256/aa/x?filename=a&expires=9999999999&signature=00', {}, 403],
      ];
      for (const [path, init, status] of cases) {
        const res = await raw(path, { method: 'HEAD', ...init });
        expect(res.status).toBe(status);
        expect(res.headers.get('content-type')).toContain('application/json');
        expect(res.headers.get('x-request-id')).toBeTruthy();
      }
    });

    test('a traversal attempt through the signed object route is refused', async () => {
      for (const path of ['/api/storage/..%2F..%2Fetc%2Fpasswd?filename=a&expires=9999999999&signature=00', '/api/storage/sha256/../../../etc/passwd']) {
        const res = await raw(path);
        expect([403, 404]).toContain(res.status);
        expect(await res.json()).toEqual({ error: expect.any(String) });
      }
    });

    test('Range answers 206 slices that resume the archive; a range past the end is 416', async () => {
      const path = '/api/models/demo/download?quant=int4&sdk=v1.2';
      const full = Buffer.from(await (await raw(path, bearer(key.key))).arrayBuffer());
      const size = full.length;
      const points = [0, 10, 40, 1000, size - 300, size - 22, size];
      const pieces: Buffer[] = [];
      for (let i = 0; i + 1 < points.length; i++) {
        const res = await raw(path, bearer(key.key, { range: `bytes=${points[i]}-${points[i + 1]! - 1}` }));
        expect(res.status).toBe(206);
        expect(res.headers.get('content-range')).toBe(`bytes ${points[i]}-${points[i + 1]! - 1}/${size}`);
        pieces.push(Buffer.from(await res.arrayBuffer()));
      }
      expect(Buffer.concat(pieces).equals(full)).toBe(true);
      const open = await raw(path, bearer(key.key, { range: `bytes=${size - 5}-` }));
      expect(Buffer.from(await open.arrayBuffer()).equals(full.subarray(size - 5))).toBe(true);
      const stale = await raw(path, bearer(key.key, { range: 'bytes=5-', 'if-range': '"other"' }));
      expect(stale.status).toBe(200);
      await stale.arrayBuffer();
      const past = await raw(path, bearer(key.key, { range: `bytes=${size}-` }));
      expect(past.status).toBe(416);
      expect(past.headers.get('content-range')).toBe(`bytes */${size}`);
      expect(await past.json()).toEqual({ error: 'requested range is not satisfiable' });
    });

    test('the JSON envelope of a directory links to the same stream, signed and short-lived', async () => {
      const viaAccept = await raw('/api/models/demo/download?quant=int4&sdk=v1.2', bearer(key.key, { accept: 'application/json' }));
      const envelope = (await viaAccept.json()) as { mode: string; url: string; filename: string };
      expect(envelope).toEqual({ mode: 'zip', url: expect.stringMatching(/^http:\/\/localhost:8080\/api\/models\/demo\/zip\?/), filename: 'demo-int4-v1.2.zip' });
      const direct = Buffer.from(await (await raw('/api/models/demo/download?quant=int4&sdk=v1.2', bearer(key.key))).arrayBuffer());
      const linked = await raw(envelope.url);
      expect(linked.status).toBe(200);
      expect(Buffer.from(await linked.arrayBuffer()).equals(direct)).toBe(true);
      const ranged = await raw(envelope.url, { headers: { range: 'bytes=3-9' } });
      expect(ranged.status).toBe(206);
      expect(Buffer.from(await ranged.arrayBuffer()).equals(direct.subarray(3, 10))).toBe(true);
      const head = await raw(envelope.url, { method: 'HEAD' });
      expect(head.headers.get('content-length')).toBe(String(direct.length));

      const tampered = await raw(envelope.url.replace(/artifact=[^&]+/, 'artifact=art_other'));
      expect(tampered.status).toBe(403);
      expect(await tampered.json()).toEqual({ error: expect.any(String) });
      clock.advance(t.ctx.config.presignTtlMs + 1000);
      const expired = await raw(envelope.url);
      clock.advance(-(t.ctx.config.presignTtlMs + 1000));
      expect(expired.status).toBe(403);
    });

    test('a single file answers 302 to a signed link that serves it with HEAD and Range', async () => {
      const res = await raw('/api/models/tiny/download?quant=int8&sdk=v1.0', bearer(key.key));
      expect(res.status).toBe(302);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('x-linked-size')).toBe(String(singleBytes.length));
      expect(res.headers.get('x-linked-etag')).toMatch(/^"[0-9a-f]{64}"$/);
      const location = res.headers.get('location')!;
      expect(location).toStartWith('http://localhost:8080/api/storage/sha256/');

      const file = await raw(location);
      expect(file.status).toBe(200);
      expect(file.headers.get('content-disposition')).toContain(`filename="cpd-single-${process.pid}-${kind}.gguf"`);
      expect(Buffer.from(await file.arrayBuffer()).equals(Buffer.from(singleBytes))).toBe(true);
      const part = await raw(location, { headers: { range: 'bytes=5-14' } });
      expect(part.status).toBe(206);
      expect(await part.text()).toBe(new TextDecoder().decode(singleBytes.subarray(5, 15)));
      const head = await raw(location, { method: 'HEAD' });
      expect(head.headers.get('content-length')).toBe(String(singleBytes.length));
      expect((await head.arrayBuffer()).byteLength).toBe(0);

      const headDownload = await raw('/api/models/tiny/download?quant=int8&sdk=v1.0', { method: 'HEAD', ...bearer(key.key) });
      expect(headDownload.status).toBe(302);
      expect(headDownload.headers.get('x-linked-size')).toBe(String(singleBytes.length));

      const envelope = await (await raw('/api/models/tiny/download?quant=int8&sdk=v1.0&format=json', bearer(key.key))).json();
      expect(envelope).toEqual({ mode: 'redirect', url: expect.stringContaining('/api/storage/sha256/'), filename: `cpd-single-${process.pid}-${kind}.gguf` });
    });

    test('a tampered or expired signed object link is 403 {error}', async () => {
      const location = (await raw('/api/models/tiny/download?quant=int8&sdk=v1.0', bearer(key.key))).headers.get('location')!;
      for (const bad of [location.replace(/signature=([0-9a-f])/, (_m, c) => `signature=${c === '0' ? '1' : '0'}`), location.replace('filename=', 'filename=x'), location.replace(/expires=\d+/, 'expires=99999999999'), location.replace(/&signature=[^&]+/, '')]) {
        const res = await raw(bad);
        expect(res.status).toBe(403);
        expect(await res.json()).toEqual({ error: expect.any(String) });
      }
      clock.advance(t.ctx.config.presignTtlMs + 1000);
      const expired = await raw(location);
      clock.advance(-(t.ctx.config.presignTtlMs + 1000));
      expect(expired.status).toBe(403);
    });

    test('downloads are recorded with user, key and artifact; HEAD and resumed ranges are not', async () => {
      const fresh = await makeUser(t);
      const freshKey = await makeApiKey(t, fresh.id);
      const path = '/api/models/demo/download?quant=int8&sdk=v1.0';
      await (await raw(path, bearer(freshKey.key))).arrayBuffer();
      await (await raw(`${path}&format=json`, bearer(fresh.token))).json();
      await raw(path, { method: 'HEAD', ...bearer(freshKey.key) });
      await (await raw(path, bearer(freshKey.key, { range: 'bytes=100-' }))).arrayBuffer();
      await t.services.registry.flushDownloads();
      const rows = await t.ctx.database.query<{ user_id: string; key_id: string | null; slug: string; quant: string; sdk: string }>(
        sql`select user_id, key_id, slug, quant, sdk from downloads where user_id = ${fresh.id} order by created_at, key_id nulls last`,
      );
      expect(rows).toHaveLength(2);
      expect(rows).toContainEqual({ user_id: fresh.id, key_id: freshKey.id, slug: 'demo', quant: 'int8', sdk: 'v1.0' });
      expect(rows).toContainEqual({ user_id: fresh.id, key_id: null, slug: 'demo', quant: 'int8', sdk: 'v1.0' });
      const times = await t.ctx.database.query<{ at_ms: number }>(
        sql`select (extract(epoch from created_at) * 1000)::float8 as at_ms from downloads where user_id = ${fresh.id}`,
      );
      expect(times.map((r) => Number(r.at_ms))).toEqual([clock.now().getTime(), clock.now().getTime()]);
    });
  });
}

describe('download rate limit', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('postgres', { RATE_LIMITS: 'download=3/1h' });
    const bundle = makeBundle(bundleFiles(1));
    await publish(t, { path: bundle, slug: 'limited', quant: 'int4', sdk: 'v1.0' });
    rmSync(bundle, { recursive: true, force: true });
  });
  afterAll(() => t.close());

  test('each credential gets its own bucket; an empty one answers 429 with Retry-After', async () => {
    const user = await makeUser(t);
    const key = await makeApiKey(t, user.id);
    const path = '/api/models/limited/download?quant=int4&sdk=v1.0&format=json';
    for (let i = 0; i < 3; i++) expect((await t.request('GET', path, { token: key.key })).status).toBe(200);
    const limited = await t.request('GET', path, { token: key.key });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ error: expect.any(String) });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await t.request('GET', path, { token: user.token })).status).toBe(200);
  });
});

describe('download records when a commit acknowledgement is lost (postgres)', () => {
  let t: TestApp;
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  beforeAll(async () => {
    // The app reaches PostgreSQL through a TCP proxy that can drop the answer to an insert.
    const made = await createProxiedTestDatabase(4);
    ({ direct: testDb, proxy } = made);
    t = await createTestApp('postgres', { RATE_LIMITS: 'download=1000/1m' }, { testDb: made.proxied });
    const bundle = makeBundle(bundleFiles(1));
    await publish(t, { path: bundle, slug: 'acked', quant: 'int4', sdk: 'v1.0' });
    rmSync(bundle, { recursive: true, force: true });
  });
  afterAll(async () => {
    await t.close();
    await proxy.close();
    await testDb.drop();
  });

  test('the replayed batch stores each download once and sets none aside', async () => {
    const user = await makeUser(t);
    const key = await makeApiKey(t, user.id);
    const path = '/api/models/acked/download?quant=int4&sdk=v1.0&format=json';
    // A first download puts the key in the cache (and its last use in the database): the dropped
    // connection then carries nothing but the download records, which is what this test is about.
    expect((await t.request('GET', path, { token: key.key })).status).toBe(200);
    await t.services.registry.flushDownloads();
    proxy.loseNextAck('INSERT');
    const statuses = await Promise.all(Array.from({ length: 12 }, () => t.request('GET', path, { token: key.key }).then((r) => r.status)));
    expect(statuses).toEqual(Array(12).fill(200));
    await t.services.registry.flushDownloads();
    expect(proxy.lostAcks).toBe(1);
    const [row] = await testDb.database.query<{ n: number; ids: number }>(
      sql`select count(*)::int as n, count(distinct id)::int as ids from downloads where user_id = ${user.id}`,
    );
    expect(row).toEqual({ n: 13, ids: 13 });
    expect(t.logs.filter((line) => line.includes('set aside'))).toEqual([]);
  });
});

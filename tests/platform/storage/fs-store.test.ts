import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import fc from 'fast-check';
import { AppError } from '../../../src/platform/errors';
import { contentKey, createFsStore, isValidKey, parseRange, signPath, verifySignedPath } from '../../../src/platform/storage';

const SECRET = 'storage-test-secret-0123456789abcdef';

describe('object keys', () => {
  test.each(['../x', 'a/../b', '/abs', 'a//b', '.hidden', 'a/.', 'a/..', 'A', 'a\\b', '%2e%2e/x', '', 'a/', 'a/b/', 'a b', 'a\0b'])('%p is refused', (key) => {
    expect(isValidKey(key)).toBe(false);
  });

  test('content keys are valid and derived only from a SHA-256 digest', () => {
    const key = contentKey('a'.repeat(64));
    expect(key).toBe(`sha256/aa/${'a'.repeat(64)}`);
    expect(isValidKey(key)).toBe(true);
    for (const bad of ['../../etc/passwd', 'A'.repeat(64), 'a'.repeat(63)]) expect(() => contentKey(bad)).toThrow(AppError);
  });

  test('no valid key, whatever its characters, resolves outside the store', () => {
    const root = resolve('/srv/objects/data');
    fc.assert(
      fc.property(fc.array(fc.constantFrom('a', '0', '.', '-', '_', '/', '\\', '%', ' '), { maxLength: 24 }), (chars) => {
        const key = chars.join('');
        if (isValidKey(key)) expect(resolve(root, key).startsWith(root + sep)).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });
});

describe('signed links', () => {
  const now = new Date('2026-01-01T00:00:00Z');
  test('round-trip, then any change or expiry is refused', () => {
    const link = signPath(SECRET, '/api/storage/k', { filename: 'a.bin' }, 60_000, now);
    const query = () => new URLSearchParams(link.split('?')[1]);
    expect(verifySignedPath(SECRET, '/api/storage/k', query(), now)).toMatchObject({ filename: 'a.bin' });
    expect(() => verifySignedPath(SECRET, '/api/storage/other', query(), now)).toThrow('invalid link signature');
    expect(() => verifySignedPath('another-secret-0123456789abcdefghij', '/api/storage/k', query(), now)).toThrow('invalid link signature');
    const changed = query();
    changed.set('filename', 'b.bin');
    expect(() => verifySignedPath(SECRET, '/api/storage/k', changed, now)).toThrow('invalid link signature');
    const added = query();
    added.set('extra', '1');
    expect(() => verifySignedPath(SECRET, '/api/storage/k', added, now)).toThrow('invalid link signature');
    expect(() => verifySignedPath(SECRET, '/api/storage/k', query(), new Date(now.getTime() + 61_000))).toThrow('link expired');
  });
});

describe('byte ranges', () => {
  test.each([
    [null, 100, null],
    ['bytes=0-9', 100, { start: 0, end: 10 }],
    ['bytes=90-', 100, { start: 90, end: 100 }],
    ['bytes=-10', 100, { start: 90, end: 100 }],
    ['bytes=-500', 100, { start: 0, end: 100 }],
    ['bytes=50-5000', 100, { start: 50, end: 100 }],
    ['bytes=100-', 100, 'unsatisfiable'],
    ['bytes=-0', 100, 'unsatisfiable'],
    ['bytes=9-3', 100, null],
    ['bytes=0-1,5-6', 100, null],
    ['items=0-1', 100, null],
    ['bytes=-', 100, null],
  ])('%p of %d bytes', (header, size, expected) => {
    expect(parseRange(header, size)).toEqual(expected as ReturnType<typeof parseRange>);
  });
});

describe('filesystem store', () => {
  let root: string;
  let source: string;
  let store: ReturnType<typeof createFsStore>;
  let now = Date.parse('2026-01-01T00:00:00Z');
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'cpd-fs-store-'));
    source = join(root, 'source.bin');
    writeFileSync(source, 'hello object store');
    store = createFsStore({ root: join(root, 'objects'), publicUrl: 'http://cpd.test', secret: () => SECRET, clock: { now: () => new Date(now) } });
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  test('put, exists, ranged read and delete', async () => {
    const key = contentKey('b'.repeat(64));
    expect(await store.exists(key)).toBe(false);
    await store.putFile(key, source);
    expect(await store.exists(key)).toBe(true);
    expect(await new Response(store.read(key, 6, 12)).text()).toBe('object');
    expect(await new Response(store.read(key)).text()).toBe('hello object store');
    expect(readdirSync(join(root, 'objects', 'tmp'))).toEqual([]);
    await store.delete(key);
    expect(await store.exists(key)).toBe(false);
  });

  test('chunks reads a byte range through one reused buffer, and refuses a short object', async () => {
    const bytes = crypto.getRandomValues(new Uint8Array(600_000));
    const big = join(root, 'chunks.bin');
    writeFileSync(big, bytes);
    const key = contentKey('c'.repeat(64));
    await store.putFile(key, big);
    const copies: Uint8Array[] = [];
    const buffers = new Set<ArrayBufferLike>();
    for await (const chunk of store.chunks(key, 100, 599_000)) {
      copies.push(chunk.slice());
      buffers.add(chunk.buffer);
    }
    expect(copies.length).toBeGreaterThan(1);
    expect(buffers.size).toBe(1);
    expect(Buffer.concat(copies).equals(Buffer.from(bytes.subarray(100, 599_000)))).toBe(true);
    const drain = async () => {
      for await (const _ of store.chunks(key, 0, 700_000));
    };
    await expect(drain()).rejects.toThrow('ends before byte 700000');
    await store.delete(key);
  });

  test('every operation refuses a traversing key before touching the disk', async () => {
    for (const key of ['../source.bin', '../../etc/passwd', 'a/../../x', '/etc/passwd']) {
      expect(() => store.pathOf(key)).toThrow('invalid object key');
      expect(() => store.read(key)).toThrow('invalid object key');
      await expect(store.chunks(key, 0, 1)[Symbol.asyncIterator]().next()).rejects.toThrow('invalid object key');
      expect(() => store.presign(key, { filename: 'x', ttlMs: 1000 })).toThrow('invalid object key');
      await expect(store.putFile(key, source)).rejects.toThrow('invalid object key');
      await expect(store.delete(key)).rejects.toThrow('invalid object key');
    }
    expect(existsSync(join(root, 'x'))).toBe(false);
  });

  test('a signed link serves GET, HEAD and Range; tampered or expired is 403', async () => {
    const key = contentKey('c'.repeat(64));
    await store.putFile(key, source);
    const url = store.presign(key, { filename: 'model.gguf', ttlMs: 60_000 });
    expect(url).toStartWith('http://cpd.test/api/storage/sha256/cc/');
    const get = await store.serveSigned(new Request(url), key);
    expect(get.status).toBe(200);
    expect(get.headers.get('content-disposition')).toContain('filename="model.gguf"');
    expect(await get.text()).toBe('hello object store');
    const part = await store.serveSigned(new Request(url, { headers: { range: 'bytes=-5' } }), key);
    expect(part.status).toBe(206);
    expect(await part.text()).toBe('store');
    const head = await store.serveSigned(new Request(url, { method: 'HEAD' }), key);
    expect(head.headers.get('content-length')).toBe('18');
    const beyond = await store.serveSigned(new Request(url, { headers: { range: 'bytes=18-' } }), key);
    expect(beyond.status).toBe(416);
    expect(await beyond.json()).toEqual({ error: 'requested range is not satisfiable' });

    const other = contentKey('d'.repeat(64));
    await expect(store.serveSigned(new Request(url), other)).rejects.toMatchObject({ kind: 'forbidden' });
    await expect(store.serveSigned(new Request(url.replace('model.gguf', 'evil.sh')), key)).rejects.toMatchObject({ kind: 'forbidden' });
    now += 61_000;
    await expect(store.serveSigned(new Request(url), key)).rejects.toMatchObject({ kind: 'forbidden', message: 'link expired' });
  });
});

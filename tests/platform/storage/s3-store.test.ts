/**
 * The S3 backend against s3rver, a local server speaking the S3 protocol (started here on port 0).
 * s3rver does not check presigned signatures' freshness the way S3 does; the local backend's own
 * signature checks are tested in fs-store.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import { contentKey, createS3Store, parseS3Url } from '../../../src/platform/storage';
import { publishArtifact } from '../../../src/modules/registry';
import { createTestApp, type TestApp } from '../../support/app';
import { makeApiKey, makeUser } from '../../support/make';
import { bundleFiles, makeBundle, unzip } from '../../modules/registry/support';

let server: S3rver;
let endpoint: string;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cpd-s3rver-'));
  server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: join(dir, 'data'), configureBuckets: [{ name: 'models', configs: [] }] });
  const address = (await server.run()) as AddressInfo;
  endpoint = `http://127.0.0.1:${address.port}`;
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const credentials = () => ({ endpoint, region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });

describe('S3 store', () => {
  test('parses s3:// URLs', () => {
    expect(parseS3Url('s3://bucket')).toEqual({ bucket: 'bucket', prefix: '' });
    expect(parseS3Url('s3://bucket/some/prefix/')).toEqual({ bucket: 'bucket', prefix: 'some/prefix' });
  });

  test('put, exists, ranged read, presigned GET with Range, delete', async () => {
    const store = createS3Store({ bucket: 'models', prefix: 'cpd', ...credentials() });
    const source = join(dir, 'object.bin');
    writeFileSync(source, 'hello from s3');
    const key = contentKey('e'.repeat(64));
    expect(await store.exists(key)).toBe(false);
    await store.putFile(key, source);
    expect(await store.exists(key)).toBe(true);
    expect(await new Response(store.read(key, 6, 10)).text()).toBe('from');
    let chunked = '';
    for await (const chunk of store.chunks(key, 0, 5)) chunked += new TextDecoder().decode(chunk);
    expect(chunked).toBe('hello');
    const url = store.presign(key, { filename: 'object.bin', ttlMs: 60_000 });
    expect(url).toContain(`/models/cpd/sha256/ee/${'e'.repeat(64)}`);
    expect(url).toContain('X-Amz-Expires=60');
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('hello from s3');
    const part = await fetch(url, { headers: { range: 'bytes=0-4' } });
    expect(part.status).toBe(206);
    expect(await part.text()).toBe('hello');
    await store.delete(key);
    expect(await store.exists(key)).toBe(false);
  });

  test('keys that could traverse are refused before any request', () => {
    const store = createS3Store({ bucket: 'models', prefix: '', ...credentials() });
    for (const key of ['../other-bucket/x', 'a/../../b', '/abs']) {
      expect(() => store.read(key)).toThrow('invalid object key');
      expect(() => store.presign(key, { filename: 'x', ttlMs: 1000 })).toThrow('invalid object key');
    }
  });

  describe('the registry on S3', () => {
    let t: TestApp;
    let bundle: string;
    beforeAll(async () => {
      t = await createTestApp('postgres', {
        STORAGE_URL: 's3://models/registry',
        S3_ENDPOINT: endpoint,
        S3_REGION: 'us-east-1',
        S3_ACCESS_KEY_ID: 'S3RVER',
        S3_SECRET_ACCESS_KEY: 'S3RVER',
      });
      bundle = makeBundle(bundleFiles(3));
    });
    afterAll(async () => {
      await t.close();
      rmSync(bundle, { recursive: true, force: true });
    });

    test('a single file redirects to a presigned S3 URL; a directory streams a valid ZIP from S3', async () => {
      expect(t.services.store.kind).toBe('s3');
      await publishArtifact(t.ctx, t.services.store, { path: join(bundle, 'weight.bin'), slug: 'file', quant: 'int4', sdk: 'v1.0' });
      await publishArtifact(t.ctx, t.services.store, { path: bundle, slug: 'dir', quant: 'int4', sdk: 'v1.0' });
      const user = await makeUser(t);
      const { key } = await makeApiKey(t, user.id);
      const auth = { authorization: `Bearer ${key}` };

      const redirect = await t.app.handle(new Request('http://localhost/api/models/file/download?quant=int4&sdk=v1.0', { headers: auth }));
      expect(redirect.status).toBe(302);
      const location = redirect.headers.get('location')!;
      expect(location).toStartWith(`${endpoint}/models/registry/sha256/`);
      const file = Buffer.from(await (await fetch(location)).arrayBuffer());
      expect(file.equals(Buffer.from(bundleFiles(3)['weight.bin']!))).toBe(true);

      const zip = await t.app.handle(new Request('http://localhost/api/models/dir/download?quant=int4&sdk=v1.0', { headers: auth }));
      expect(zip.status).toBe(200);
      const bytes = new Uint8Array(await zip.arrayBuffer());
      expect(bytes.length).toBe(Number(zip.headers.get('content-length')));
      const zipPath = join(dir, 'dir.zip');
      writeFileSync(zipPath, bytes);
      expect(unzip(['-t', zipPath]).out).toContain('No errors detected');
      rmSync(zipPath);
    });
  });
});

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRegistryService } from '../../../src/modules/registry';
import { createTestApp, createTestContext, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { bundleFiles, makeBundle, publish } from './support';
import { waitFor } from '../../support/wait';

for (const kind of DB_KINDS) {
  describe(`model catalog (${kind})`, () => {
    let t: TestApp;
    let admin: Awaited<ReturnType<typeof makeUser>>;
    let user: Awaited<ReturnType<typeof makeUser>>;
    const dirs: string[] = [];
    const bundle = (seed: number) => {
      const dir = makeBundle(bundleFiles(seed));
      dirs.push(dir);
      return dir;
    };

    beforeAll(async () => {
      t = await createTestApp(kind);
      admin = await makeUser(t, { admin: true });
      user = await makeUser(t);
    });
    afterAll(async () => {
      await t.close();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });

    test('the empty catalog is an empty array', async () => {
      const res = await t.request('GET', '/api/models');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(res.body).toEqual([]);
    });

    test('records carry exactly the spec fields, ordered by slug, sdk newest and size of that sdk', async () => {
      const small = bundle(1);
      const large = makeBundle({ ...bundleFiles(2), 'extra.bin': new Uint8Array(5000) });
      dirs.push(large);
      await publish(t, { path: small, slug: 'zeta', quant: 'int8', sdk: 'v1.9', name: 'Zeta 8B', family: 'zeta', description: 'A small model' });
      await publish(t, { path: large, slug: 'zeta', quant: 'int4', sdk: 'v1.10' });
      await publish(t, { path: small, slug: 'zeta', quant: 'int326', sdk: 'v1.10' });
      await publish(t, { path: join(small, 'weight.bin'), slug: 'alpha', quant: 'int4', sdk: 'v2.0' });

      const res = await t.request('GET', '/api/models');
      expect(res.body).toEqual([
        { slug: 'alpha', name: 'alpha', family: '', sdk: 'v2.0', quants: ['int4'], size_bytes: 200_001, description: '' },
        {
          slug: 'zeta',
          name: 'Zeta 8B',
          family: 'zeta',
          sdk: 'v1.10',
          quants: ['int4', 'int8', 'int326'],
          size_bytes: 200_002 + 5000 + Buffer.byteLength(String(bundleFiles(2)['config.json'])) + 17,
          description: 'A small model',
        },
      ]);
      for (const record of res.body) expect(Object.keys(record).sort()).toEqual(['description', 'family', 'name', 'quants', 'sdk', 'size_bytes', 'slug']);
    });

    test('GET /api/models/{slug} answers one record, 404 for an unknown slug', async () => {
      const one = await t.request('GET', '/api/models/zeta');
      expect(one.status).toBe(200);
      expect(one.body).toMatchObject({ slug: 'zeta', sdk: 'v1.10' });
      const missing = await t.request('GET', '/api/models/nope');
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({ error: expect.any(String) });
    });

    test('admin metadata edits: 401, 403, 400, 404 and 200', async () => {
      const path = '/api/admin/models/zeta';
      expect((await t.request('PUT', path, { body: { name: 'X' } })).status).toBe(401);
      expect((await t.request('PUT', path, { body: { name: 'X' }, token: user.token })).status).toBe(403);
      for (const body of [{}, { name: '' }, { slug: 'other' }, { description: 42 }])
        expect((await t.request('PUT', path, { body, token: admin.token })).status).toBe(400);
      expect((await t.request('PUT', '/api/admin/models/nope', { body: { name: 'X' }, token: admin.token })).status).toBe(404);
      const ok = await t.request('PUT', path, { body: { name: 'Zeta <8B>', description: 'Edited' }, token: admin.token });
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ slug: 'zeta', name: 'Zeta <8B>', family: 'zeta', description: 'Edited' });
      expect((await t.request('GET', '/api/models/zeta')).body.name).toBe('Zeta <8B>');
    });

    test('republishing keeps metadata not given again and replaces the artifact', async () => {
      const before = await t.services.registry.resolveArtifact('zeta', 'int8', 'v1.9');
      await publish(t, { path: bundle(3), slug: 'zeta', quant: 'int8', sdk: 'v1.9' });
      const after = await t.services.registry.resolveArtifact('zeta', 'int8', 'v1.9');
      expect(after.id).not.toBe(before.id);
      expect(after.contentHash).not.toBe(before.contentHash);
      expect((await t.request('GET', '/api/models/zeta')).body.name).toBe('Zeta <8B>');
      await expect(t.services.registry.requireArtifactById(before.id)).rejects.toThrow('artifact not found');
    });

    test('a publish in another process reaches this catalog through NOTIFY', async () => {
      const other = await createTestContext(kind, {}, { testDb: t.testDb });
      try {
        const registry = createRegistryService(other.ctx, { store: t.services.store });
        await registry.load();
        await publish(t, { path: bundle(4), slug: 'notified', quant: 'int4', sdk: 'v1.0' });
        await waitFor(() => registry.listModels().some((m) => m.slug === 'notified'), 'the other catalog to reload');
      } finally {
        await other.close();
      }
    });

    test('the artifact service contract: files with sizes, CRC-32 and SHA-256, and their bytes', async () => {
      const files = bundleFiles(5);
      const dir = makeBundle(files);
      dirs.push(dir);
      await publish(t, { path: dir, slug: 'contract', quant: 'int8', sdk: 'v3.1' });
      const artifact = await t.services.registry.resolveArtifact('contract', 'int8', 'v3.4');
      expect(artifact.kind).toBe('directory');
      expect(artifact.files.map((f) => f.path)).toEqual(['config.json', 'tokenizer/tokenizer.json', 'weight.bin']);
      for (const f of artifact.files) {
        const original = Buffer.from(files[f.path]!);
        expect(f.size).toBe(original.length);
        expect(f.crc32).toBe(Bun.hash.crc32(original));
        expect(f.sha256).toBe(new Bun.CryptoHasher('sha256').update(original).digest('hex'));
        const bytes = Buffer.from(await new Response(t.services.registry.openFile(artifact, f.path)).arrayBuffer());
        expect(bytes.equals(original)).toBe(true);
      }
      expect(() => t.services.registry.openFile(artifact, 'missing.bin')).toThrow();
    });

    test('a symlink inside the bundle is published as the file it points to', async () => {
      const dir = makeBundle({ 'weight.bin': 'real bytes' });
      dirs.push(dir);
      Bun.spawnSync(['ln', '-s', 'weight.bin', join(dir, 'alias.bin')]);
      writeFileSync(join(dir, 'config.json'), '{}');
      await publish(t, { path: dir, slug: 'linked', quant: 'int4', sdk: 'v1.0' });
      const artifact = await t.services.registry.resolveArtifact('linked', 'int4', 'v1.0');
      expect(artifact.files.map((f) => [f.path, f.size])).toEqual([
        ['alias.bin', 10],
        ['config.json', 2],
        ['weight.bin', 10],
      ]);
    });
  });
}

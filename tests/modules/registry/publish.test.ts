import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { publishArtifact } from '../../../src/modules/registry';
import type { ObjectStore } from '../../../src/platform/storage';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { waitFor } from '../../support/wait';
import { bundleFiles, makeBundle, publish } from './support';

describe('publishing', () => {
  let t: TestApp;
  const dirs: string[] = [];
  const bundle = (files: Record<string, string | Uint8Array> = bundleFiles(1)) => {
    const dir = makeBundle(files);
    dirs.push(dir);
    return dir;
  };
  const attempt = (input: Partial<Parameters<typeof publishArtifact>[2]>, store: ObjectStore = t.services.store) =>
    publishArtifact(t.ctx, store, { path: bundle(), slug: 'good', quant: 'int4', sdk: 'v1.0', ...input });

  beforeAll(async () => {
    t = await createTestApp('postgres');
  });
  afterAll(async () => {
    await t.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test.each(['Demo', '-demo', '.demo', '_demo', 'a/b', '../x', 'a b', '', 'é'])('slug %p is refused with a clear error', async (slug) => {
    await expect(attempt({ slug })).rejects.toThrow(/invalid slug/);
  });

  test.each([
    ['quant', { quant: 'int2' }, /invalid quant/],
    ['sdk', { sdk: '1.0' }, /invalid sdk/],
    ['sdk', { sdk: 'v1' }, /invalid sdk/],
  ])('a bad %s is refused', async (_what, input, message) => {
    await expect(attempt(input)).rejects.toThrow(message);
  });

  test('a path that does not exist is refused', async () => {
    await expect(attempt({ path: '/nonexistent/bundle' })).rejects.toThrow('path "/nonexistent/bundle" does not exist');
  });

  test('an empty directory is refused', async () => {
    const dir = bundle({});
    await expect(attempt({ path: dir })).rejects.toThrow(/has no files/);
  });

  test('symlinks leaving the directory are refused, to a file or a directory, relative or absolute', async () => {
    const outside = bundle({ 'secret.txt': 'secret' });
    for (const target of [join(outside, 'secret.txt'), outside, '../../etc/passwd', '/etc/passwd', 'missing-target']) {
      const dir = bundle();
      mkdirSync(join(dir, 'nested'));
      symlinkSync(target, join(dir, 'nested', 'escape'));
      await expect(attempt({ path: dir })).rejects.toThrow(/symlink "nested\/escape" points outside the bundle directory/);
    }
    const loop = bundle();
    symlinkSync('.', join(loop, 'self'));
    await expect(attempt({ path: loop })).rejects.toThrow(/symlink "self"/);
  });

  test('a file name with a backslash is refused: Windows extractors would write `..\\..\\evil.txt` above their folder', async () => {
    for (const name of ['..\\..\\evil.txt', 'sub\\file.bin']) {
      const dir = bundle({ 'ok.txt': 'fine', [name]: 'payload' });
      await expect(attempt({ path: dir })).rejects.toThrow(/a file name with "\\" cannot go into a ZIP/);
    }
  });

  test('nothing of a refused publish is visible', async () => {
    const rows = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from artifacts`);
    expect(rows[0]!.n).toBe(0);
    expect((await t.request('GET', '/api/models')).body).toEqual([]);
  });

  test('an interrupted publish leaves nothing half-visible and the old artifact served', async () => {
    await publish(t, { path: bundle(bundleFiles(1)), slug: 'steady', quant: 'int4', sdk: 'v1.0' });
    const old = await t.services.registry.resolveArtifact('steady', 'int4', 'v1.0');
    let stored = 0;
    const failing: ObjectStore = {
      ...t.services.store,
      async putFile(key, path) {
        if (stored++ === 1) throw new Error('disk full');
        await t.services.store.putFile(key, path);
      },
    };
    await expect(attempt({ path: bundle(bundleFiles(9)), slug: 'steady' }, failing)).rejects.toThrow('disk full');
    await expect(attempt({ path: bundle(bundleFiles(10)), slug: 'brand-new' }, { ...failing, putFile: () => Promise.reject(new Error('gone')) })).rejects.toThrow('gone');
    await t.services.registry.reload();
    expect((await t.services.registry.resolveArtifact('steady', 'int4', 'v1.0')).id).toBe(old.id);
    expect(t.services.registry.listModels().map((m) => m.slug)).toEqual(['steady']);
    const rows = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from models where slug = 'brand-new'`);
    expect(rows[0]!.n).toBe(0);
  });

  test('a republish serves the old artifact until the new one is complete', async () => {
    await publish(t, { path: bundle(bundleFiles(20)), slug: 'swap', quant: 'int8', sdk: 'v1.0' });
    const old = await t.services.registry.resolveArtifact('swap', 'int8', 'v1.0');
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let reachedGate = false;
    const slow: ObjectStore = {
      ...t.services.store,
      async putFile(key, path) {
        reachedGate = true;
        await gate;
        await t.services.store.putFile(key, path);
      },
    };
    const running = attempt({ path: bundle(bundleFiles(21)), slug: 'swap', quant: 'int8' }, slow);
    await waitFor(() => reachedGate, 'the publish to reach the object store');
    await t.services.registry.reload();
    const during = await t.request('GET', '/api/models/swap/download?quant=int8&sdk=v1.0&format=json', { token: (await makeUser(t)).token });
    expect(during.status).toBe(200);
    expect((await t.services.registry.resolveArtifact('swap', 'int8', 'v1.0')).id).toBe(old.id);
    release();
    const result = await running;
    await t.services.registry.reload();
    expect((await t.services.registry.resolveArtifact('swap', 'int8', 'v1.0')).id).toBe(result.id);
  });
});

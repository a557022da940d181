/**
 * `cpd engine install`: fake GitHub releases with the fixture engine packaged under the aria release names
 * it, fetched through the real releases service.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { zipSync } from 'fflate';
import { create as createTar } from 'tar';
import { createReleasesService } from '../../../src/modules/releases';
import { extractArchive, installedVersions, installRuntime, locateBinary, locateLibrary, openEngineLibrary, rollbackRuntime } from '../../../src/modules/runtime';
import { createTestContext, type TestContext } from '../../support/app';
import { type FakeGitHub, startFakeGitHub } from '../../support/fake-github';
import { fakeReleaseAssets, makeBundle } from '../../support/runtime-fixtures';

const REPO = 'ariacompute/engine';
const OS = 'linux_x86_64';
let gh: FakeGitHub;
let tc: TestContext;
let releases: ReturnType<typeof createReleasesService>;
const work = mkdtempSync(join(tmpdir(), 'cpd-install-'));

function assetPath(tag: string, name: string) {
  return `/${REPO}/releases/download/${tag}/${name}`;
}

/** Publishes the fixture engine as release `tag` (plus a macOS asset that must not be fetched). */
async function publishRelease(tag: string, overrides: Record<string, { digest?: string | null; size?: number }> = {}) {
  const assets = await fakeReleaseAssets('engine', tag.slice(1), OS);
  for (const a of assets) gh.assets[assetPath(tag, a.name)] = a.body;
  const mac = `aria-engine_${tag.slice(1)}_macos.tar.gz`;
  gh.assets[assetPath(tag, mac)] = 'not for this host';
  const release = { tag_name: tag, assets: [...assets.map((a) => ({ name: a.name, ...overrides[a.name] })), { name: mac }] };
  gh.releases[REPO]!.byTag![tag] = release;
  return release;
}

beforeAll(async () => {
  gh = startFakeGitHub({ releases: { [REPO]: { latest: null, byTag: {} } } });
  tc = await createTestContext('postgres', { GITHUB_API_URL: gh.url });
  releases = createReleasesService(tc.ctx, { freshMs: 0 });
});

afterAll(async () => {
  await gh.stop();
  await tc.close();
  rmSync(work, { recursive: true, force: true });
});

const engineDir = () => join(tc.dataDir, 'runtimes', 'engine');
const leftovers = () => readdirSync(engineDir()).filter((n) => n.startsWith('.') || n.includes('.tmp-'));

describe('cpd engine install', () => {
  test('installs the latest release for this OS, verified, and switches current', async () => {
    gh.releases[REPO]!.latest = await publishRelease('v1.2.0');
    const progress: string[] = [];
    const result = await installRuntime(tc.ctx.config, releases, { component: 'engine', os: OS, onProgress: (p) => progress.push(p.phase) });
    expect(result).toMatchObject({ tag: 'v1.2.0', assets: ['aria-engine_1.2.0_linux_x86_64.tar.gz', 'libaria-engine_ffi_1.2.0_linux_x86_64.tar.gz'], previous: null });
    expect(progress).toContain('download');
    expect(progress.filter((p) => p === 'verified')).toHaveLength(2);
    expect(progress.at(-1)).toBe('switched');
    expect(readlinkSync(join(engineDir(), 'current'))).toBe('v1.2.0');
    expect(gh.requests.some((r) => r.path.includes('_macos'))).toBe(false);

    // The installed version is what the supervisor and the FFI bindings find.
    const bin = locateBinary('engine', tc.dataDir);
    expect(bin).toBe(join(engineDir(), 'current', 'aria-engine'));
    expect(statSync(bin).mode & 0o111).not.toBe(0);
    const lib = openEngineLibrary(locateLibrary('engine', tc.dataDir));
    const model = lib.loadModel(makeBundle(work));
    expect(model.complete([{ role: 'user', content: 'installed' }]).response).toBe('echo: installed');
    model.destroy();
    lib.close();
    expect(leftovers()).toEqual([]);
  });

  test('a tagged install keeps the previous version, and --rollback switches back', async () => {
    await publishRelease('v1.3.0');
    const result = await installRuntime(tc.ctx.config, releases, { component: 'engine', tag: 'v1.3.0', os: OS });
    expect(result).toMatchObject({ tag: 'v1.3.0', previous: 'v1.2.0' });
    expect(installedVersions(tc.dataDir, 'engine')).toEqual({ current: 'v1.3.0', previous: 'v1.2.0' });
    expect(rollbackRuntime(tc.dataDir, 'engine')).toEqual({ current: 'v1.2.0', previous: 'v1.3.0' });
    expect(lstatSync(join(engineDir(), 'current')).isSymbolicLink()).toBe(true);
    expect(rollbackRuntime(tc.dataDir, 'engine')).toEqual({ current: 'v1.3.0', previous: 'v1.2.0' });
    expect(() => rollbackRuntime(tc.dataDir, 'router')).toThrow(/no previous router version/);
  });

  test('a digest or size mismatch aborts and installs nothing', async () => {
    const names = (await fakeReleaseAssets('engine', '1.4.0', OS)).map((a) => a.name);
    await publishRelease('v1.4.0', { [names[1]!]: { digest: `sha256:${'0'.repeat(64)}` } });
    await expect(installRuntime(tc.ctx.config, releases, { component: 'engine', tag: 'v1.4.0', os: OS })).rejects.toThrow(
      /libaria-engine_ffi_1\.4\.0_linux_x86_64\.tar\.gz: SHA-256 [0-9a-f]{64} does not match the release digest 0{64}/,
    );
    await publishRelease('v1.5.0', { [names[0]!.replace('1.4.0', '1.5.0')]: { size: 7 } });
    await expect(installRuntime(tc.ctx.config, releases, { component: 'engine', tag: 'v1.5.0', os: OS })).rejects.toThrow(/downloaded \d+ bytes, the release says 7/);
    expect(installedVersions(tc.dataDir, 'engine').current).toBe('v1.3.0');
    expect(existsSync(join(engineDir(), 'v1.4.0'))).toBe(false);
    expect(existsSync(join(engineDir(), 'v1.5.0'))).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  test('a release that publishes no digest is refused unless allowUnverified', async () => {
    // GitHub gives no digest for the binary (absent from the JSON).
    await publishRelease('v1.7.0', { 'aria-engine_1.7.0_linux_x86_64.tar.gz': { digest: null } });
    await expect(installRuntime(tc.ctx.config, releases, { component: 'engine', tag: 'v1.7.0', os: OS })).rejects.toThrow(
      /release v1\.7\.0 gives no SHA-256 digest for aria-engine_1\.7\.0_linux_x86_64\.tar\.gz: refusing/,
    );
    expect(existsSync(join(engineDir(), 'v1.7.0'))).toBe(false);
    const before = installedVersions(tc.dataDir, 'engine').current;
    const allowed = await installRuntime(tc.ctx.config, releases, { component: 'engine', tag: 'v1.7.0', os: OS, allowUnverified: true });
    expect(allowed.tag).toBe('v1.7.0');
    // Back to the version the other tests expect.
    await installRuntime(tc.ctx.config, releases, { component: 'engine', tag: before!, os: OS });
  });

  test('a release without this OS is refused with a clear message', async () => {
    await publishRelease('v1.6.0');
    await expect(installRuntime(tc.ctx.config, releases, { component: 'engine', tag: 'v1.6.0', os: 'windows_x86_64' })).rejects.toThrow(
      'release v1.6.0 of the engine has no binary or ffi asset for windows_x86_64',
    );
  });
});

describe('archive extraction', () => {
  async function tarOf(build: (dir: string) => string[], opts: { preservePaths?: boolean } = {}) {
    const src = mkdtempSync(join(work, 'src-'));
    const entries = build(src);
    const file = join(work, `a-${Math.random().toString(36).slice(2)}.tar.gz`);
    await createTar({ gzip: true, file, cwd: join(src, 'inner'), preservePaths: opts.preservePaths }, entries);
    return file;
  }

  test('entries escaping the target directory are refused before anything is written', async () => {
    const dotdot = await tarOf((src) => {
      mkdirSync(join(src, 'inner'));
      writeFileSync(join(src, 'inner', 'ok.txt'), 'fine');
      writeFileSync(join(src, 'evil.txt'), 'escape');
      return ['ok.txt', '../evil.txt'];
    }, { preservePaths: true });
    const outsideLink = await tarOf((src) => {
      mkdirSync(join(src, 'inner'));
      symlinkSync('/etc/passwd', join(src, 'inner', 'passwd'));
      return ['passwd'];
    });
    const relativeLink = await tarOf((src) => {
      mkdirSync(join(src, 'inner', 'lib'), { recursive: true });
      symlinkSync('../../outside', join(src, 'inner', 'lib', 'up'));
      return ['lib/up'];
    });
    const zip = join(work, 'evil.zip');
    writeFileSync(zip, zipSync({ 'ok.txt': new TextEncoder().encode('fine'), '../zip-evil.txt': new TextEncoder().encode('escape') }));

    const cases: Array<[string, string, RegExp]> = [
      [dotdot, 'x.tar.gz', /entry "\.\.\/evil\.txt" escapes the target directory/],
      [outsideLink, 'x.tar.gz', /entry "passwd" links to an absolute path \(\/etc\/passwd\)/],
      [relativeLink, 'x.tar.gz', /entry "lib\/up" links outside the target directory/],
      [zip, 'x.zip', /entry "\.\.\/zip-evil\.txt" escapes the target directory/],
    ];
    for (const [file, name, message] of cases) {
      const dest = mkdtempSync(join(work, 'dest-'));
      await expect(extractArchive(file, name, join(dest, 'tree'))).rejects.toThrow(message);
      expect(readdirSync(join(dest, 'tree'))).toEqual([]);
      expect(existsSync(join(dest, 'evil.txt')) || existsSync(join(dest, 'zip-evil.txt'))).toBe(false);
    }
  });

  test('symlinks are resolved, not read as text: `s -> .` then `t -> s/..` is refused, in either order', async () => {
    const chain = (order: string[]) =>
      tarOf((src) => {
        mkdirSync(join(src, 'inner'));
        symlinkSync('.', join(src, 'inner', 's'));
        symlinkSync('s/..', join(src, 'inner', 't'));
        writeFileSync(join(src, 'inner', 'ok.txt'), 'fine');
        return order;
      });
    for (const order of [['s', 't', 'ok.txt'], ['t', 's', 'ok.txt']]) {
      const dest = mkdtempSync(join(work, 'dest-'));
      await expect(extractArchive(await chain(order), 'x.tar.gz', join(dest, 'tree'))).rejects.toThrow(/entry "t" links outside the target directory \(s\/\.\.\)/);
      expect(readdirSync(join(dest, 'tree'))).toEqual([]);
    }
    // Links that stay inside unpack as links (a library's versioned names).
    const fine = await tarOf((src) => {
      mkdirSync(join(src, 'inner', 'lib'), { recursive: true });
      writeFileSync(join(src, 'inner', 'lib', 'libx.so.1'), 'lib');
      symlinkSync('libx.so.1', join(src, 'inner', 'lib', 'libx.so'));
      symlinkSync('lib/libx.so', join(src, 'inner', 'current.so'));
      return ['lib', 'current.so'];
    });
    const dest = join(mkdtempSync(join(work, 'dest-')), 'tree');
    await extractArchive(fine, 'x.tar.gz', dest);
    expect(readlinkSync(join(dest, 'current.so'))).toBe('lib/libx.so');
  });

  test('an escaping release archive leaves nothing installed', async () => {
    const evil = await tarOf((src) => {
      mkdirSync(join(src, 'inner'));
      writeFileSync(join(src, 'evil.txt'), 'escape');
      return ['../evil.txt'];
    }, { preservePaths: true });
    const tag = 'v9.0.0';
    const good = await fakeReleaseAssets('engine', '9.0.0', OS);
    gh.assets[assetPath(tag, good[0]!.name)] = new Uint8Array(await Bun.file(evil).arrayBuffer());
    gh.assets[assetPath(tag, good[1]!.name)] = good[1]!.body;
    gh.releases[REPO]!.byTag![tag] = { tag_name: tag, assets: good.map((a) => ({ name: a.name })) };
    await expect(installRuntime(tc.ctx.config, releases, { component: 'engine', tag, os: OS })).rejects.toThrow(/escapes the target directory/);
    expect(existsSync(join(engineDir(), tag))).toBe(false);
    expect(existsSync(join(engineDir(), 'evil.txt'))).toBe(false);
    expect(installedVersions(tc.dataDir, 'engine').current).toBe('v1.3.0');
    expect(leftovers()).toEqual([]);
  });
});

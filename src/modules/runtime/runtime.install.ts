/**
 * `cpd engine install`: the release's binary and FFI archives for this OS are
 * downloaded into a staging folder, checked (size, and the SHA-256 digest the release publishes:
 * a release without one is refused unless `allowUnverified`, since nothing else vouches for a
 * binary that the server then runs),
 * unpacked, moved to DATA_DIR/runtimes/<component>/<tag>/ and made `current` by renaming a fresh
 * symlink over it. The version it replaces stays behind `previous` for --rollback. Any failure
 * removes the staging folder and leaves the installed versions untouched.
 */
import { createWriteStream, existsSync, mkdirSync, readlinkSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../../config';
import { randomBytes } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { classifyAsset, type Release, type ReleaseAsset, type ReleasesService } from '../releases';
import { extractArchive } from './runtime.archive';
import { componentDir, currentLink, previousLink } from './runtime.paths';
import { hostOsTag, type OsTag, type RuntimeComponent } from './runtime.platform';

export type InstallProgress =
  | { phase: 'download'; asset: string; doneBytes: number; totalBytes: number }
  | { phase: 'verified' | 'unpacked'; asset: string }
  | { phase: 'switched'; tag: string };

export interface InstallOptions {
  component: RuntimeComponent;
  /** A release tag; the latest release when absent. */
  tag?: string;
  /** Defaults to this host's. */
  os?: OsTag;
  onProgress?: (p: InstallProgress) => void;
  /** Install assets the release gives no digest for (`--allow-unverified`). */
  allowUnverified?: boolean;
}

export interface InstallResult {
  component: RuntimeComponent;
  tag: string;
  dir: string;
  assets: string[];
  previous: string | null;
}

const TAG_AS_DIR = /^[\w][\w.+-]{0,127}$/;

/** The binary and FFI assets of a release for one OS (tar.gz preferred over zip, except on Windows). */
export function pickAssets(component: RuntimeComponent, release: Release, os: OsTag): ReleaseAsset[] {
  const preferZip = os === 'windows_x86_64';
  const ofKind = (kind: 'binary' | 'ffi') =>
    release.assets
      .filter((a) => {
        const info = classifyAsset(component, a.name);
        return info?.kind === kind && info.os === os;
      })
      .sort((a, b) => Number(a.name.endsWith('.zip') !== preferZip) - Number(b.name.endsWith('.zip') !== preferZip))[0];
  const picked = [ofKind('binary'), ofKind('ffi')];
  const missing = (['binary', 'ffi'] as const).filter((_, i) => !picked[i]);
  if (missing.length) throw new AppError('not_found', `release ${release.tag_name} of the ${component} has no ${missing.join(' or ')} asset for ${os}`);
  return picked as ReleaseAsset[];
}

function linkTarget(link: string): string | null {
  try {
    return readlinkSync(link);
  } catch {
    return null;
  }
}

/** Points `link` at `target` (a sibling folder name) by renaming a new symlink over it: atomic. */
function pointLink(link: string, target: string) {
  const tmp = `${link}.tmp-${randomBytes(4).toString('hex')}`;
  symlinkSync(target, tmp, 'dir');
  renameSync(tmp, link);
}

export function installedVersions(dataDir: string, component: RuntimeComponent) {
  return { current: linkTarget(currentLink(dataDir, component)), previous: linkTarget(previousLink(dataDir, component)) };
}

async function download(asset: ReleaseAsset, file: string, onProgress: InstallOptions['onProgress']) {
  const res = await fetch(asset.url, { headers: { accept: 'application/octet-stream' }, redirect: 'follow' }).catch((err: Error) => {
    throw new AppError('upstream', `download of ${asset.name} failed: ${err.message}`);
  });
  if (!res.ok || !res.body) throw new AppError('upstream', `download of ${asset.name} failed: HTTP ${res.status}`);
  const hash = new Bun.CryptoHasher('sha256');
  const out = createWriteStream(file);
  let done = 0;
  try {
    for await (const chunk of res.body) {
      hash.update(chunk);
      done += chunk.length;
      if (!out.write(chunk)) await new Promise((r) => out.once('drain', r));
      onProgress?.({ phase: 'download', asset: asset.name, doneBytes: done, totalBytes: asset.size });
    }
  } finally {
    await new Promise<void>((res2) => out.end(res2));
  }
  if (asset.size > 0 && done !== asset.size) throw new AppError('upstream', `${asset.name}: downloaded ${done} bytes, the release says ${asset.size}`);
  const sha = hash.digest('hex');
  if (asset.digest) {
    const [algo, expected] = asset.digest.split(':');
    if (algo !== 'sha256' || !expected) throw new AppError('upstream', `${asset.name}: unsupported digest ${asset.digest}`);
    if (expected.toLowerCase() !== sha) throw new AppError('upstream', `${asset.name}: SHA-256 ${sha} does not match the release digest ${expected}`);
  }
  onProgress?.({ phase: 'verified', asset: asset.name });
}

export async function installRuntime(
  config: Pick<Config, 'dataDir'>,
  releases: Pick<ReleasesService, 'latest' | 'byTag'>,
  opts: InstallOptions,
): Promise<InstallResult> {
  const { component } = opts;
  const os = opts.os ?? hostOsTag();
  if (!os) throw new AppError('not_found', `no ${component} release is published for ${process.platform}/${process.arch}`);
  const release = opts.tag ? await releases.byTag(component, opts.tag) : await releases.latest(component);
  const tag = release.tag_name;
  if (!TAG_AS_DIR.test(tag) || tag === 'current' || tag === 'previous') throw new AppError('invalid', `release tag "${tag}" cannot name a folder`);
  const assets = pickAssets(component, release, os);
  const unverified = assets.filter((a) => !a.digest).map((a) => a.name);
  if (unverified.length && !opts.allowUnverified)
    throw new AppError('upstream', `release ${tag} gives no SHA-256 digest for ${unverified.join(', ')}: refusing to install unchecked binaries (--allow-unverified installs them anyway)`);

  const base = componentDir(config.dataDir, component);
  mkdirSync(base, { recursive: true });
  const staging = join(base, `.staging-${randomBytes(4).toString('hex')}`);
  const tree = join(staging, 'tree');
  try {
    mkdirSync(tree, { recursive: true });
    for (const asset of assets) {
      const file = join(staging, `download-${asset.name}`);
      await download(asset, file, opts.onProgress);
      await extractArchive(file, asset.name, tree);
      opts.onProgress?.({ phase: 'unpacked', asset: asset.name });
    }
    const dir = join(base, tag);
    const { current } = installedVersions(config.dataDir, component);
    if (existsSync(dir)) {
      // Reinstalling a tag: move the old copy aside first so `current` never sees half a folder.
      renameSync(dir, join(staging, 'replaced'));
    }
    renameSync(tree, dir);
    if (current && current !== tag) pointLink(previousLink(config.dataDir, component), current);
    pointLink(currentLink(config.dataDir, component), tag);
    opts.onProgress?.({ phase: 'switched', tag });
    return { component, tag, dir, assets: assets.map((a) => a.name), previous: installedVersions(config.dataDir, component).previous };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Makes `previous` current again (and the current one previous). */
export function rollbackRuntime(dataDir: string, component: RuntimeComponent): { current: string; previous: string | null } {
  const { current, previous } = installedVersions(dataDir, component);
  if (!previous || !existsSync(join(componentDir(dataDir, component), previous)))
    throw new AppError('not_found', `no previous ${component} version to roll back to`);
  pointLink(currentLink(dataDir, component), previous);
  if (current) pointLink(previousLink(dataDir, component), current);
  return installedVersions(dataDir, component) as { current: string; previous: string | null };
}

/**
 * Unpacks release archives (.tar.gz with `tar`, .zip with fflate) into a directory, refusing the
 * whole archive when any entry would land outside it: absolute or `..` paths, symlinks or hard
 * links pointing outside, device files. Checked before anything is written.
 * Paths are resolved as the filesystem will resolve them once the archive is unpacked: through
 * the symlinks the archive itself declares (`s -> .` then `t -> s/..` points above the root,
 * although `s/..` reads as inside). We do not count on the tar library to stop such a write
 * (docs/decisions/0013-archive-path-checks.md).
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { AppError } from '../../platform/errors';

const ALLOWED_TAR_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

function inside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function refuse(archive: string, entry: string, why: string): never {
  throw new AppError('invalid', `archive ${archive} refused: entry "${entry}" ${why}`);
}

/** Symlinks declared so far: absolute path inside the root → its target as written. */
type Links = Map<string, string>;

const MAX_LINK_HOPS = 40; // as Linux's ELOOP limit

/**
 * Where `path` (relative to `from`) really leads, following the archive's own symlinks component
 * by component, as the kernel would; null when it passes above `root` at any step or loops.
 */
function realTarget(root: string, from: string, path: string, links: Links, hops = { left: MAX_LINK_HOPS }): string | null {
  let at = from;
  for (const part of path.split(/\/+/)) {
    if (part === '' || part === '.') continue;
    at = part === '..' ? dirname(at) : join(at, part);
    if (!inside(root, at)) return null;
    const link = links.get(at);
    if (link !== undefined) {
      if (--hops.left < 0 || isAbsolute(link)) return null;
      const resolved = realTarget(root, dirname(at), link, links, hops);
      if (resolved === null) return null;
      at = resolved;
    }
  }
  return at;
}

/** Throws unless `path` (and, for links, `linkpath`) stays inside `root`; records symlinks in `links`. */
function checkEntry(archive: string, root: string, path: string, type: string, links: Links, linkpath?: string) {
  if (isAbsolute(path) || /^[a-zA-Z]:/.test(path)) refuse(archive, path, 'has an absolute path');
  if (!inside(root, resolve(root, path))) refuse(archive, path, 'escapes the target directory');
  // The folder the entry is written into, through the links declared before it.
  const parent = realTarget(root, root, dirname(path), links);
  if (parent === null) refuse(archive, path, 'escapes the target directory through a symlink');
  const target = join(parent, basename(path));
  if (type === 'SymbolicLink' || type === 'Link') {
    if (!linkpath || isAbsolute(linkpath)) refuse(archive, path, `links to an absolute path (${linkpath})`);
    // A symlink resolves from its own folder; a hard link names a path inside the archive.
    const linked = type === 'SymbolicLink' ? realTarget(root, parent, linkpath, links) : realTarget(root, root, linkpath, links);
    if (linked === null) refuse(archive, path, `links outside the target directory (${linkpath})`);
    if (type === 'SymbolicLink') links.set(target, linkpath);
  } else {
    // A later entry of the same name replaces the link.
    links.delete(target);
  }
}

/** Once every link is known: a link declared early may lead outside through one declared later. */
function checkLinksTogether(archive: string, root: string, links: Links) {
  for (const [at, linkpath] of links)
    if (realTarget(root, dirname(at), linkpath, links) === null) refuse(archive, relative(root, at), `links outside the target directory (${linkpath})`);
}

export async function extractArchive(file: string, name: string, dest: string): Promise<void> {
  mkdirSync(dest, { recursive: true });
  const root = resolve(dest);
  if (name.endsWith('.zip')) return extractZip(file, name, root);
  if (!name.endsWith('.tar.gz') && !name.endsWith('.tgz')) throw new AppError('invalid', `unsupported archive type: ${name}`);
  // tar and fflate are imported at first use: they are off the server's start-up path.
  const { list: listTar, extract: extractTar } = await import('tar');
  const problems: Error[] = [];
  const links: Links = new Map();
  await listTar({
    file,
    strict: true,
    onReadEntry: (entry) => {
      try {
        if (!ALLOWED_TAR_TYPES.has(entry.type)) refuse(name, entry.path, `is a ${entry.type}`);
        checkEntry(name, root, entry.path, entry.type, links, entry.linkpath);
      } catch (err) {
        problems.push(err as Error);
      }
    },
  }).catch((err: Error) => {
    throw new AppError('invalid', `archive ${name} is not a readable .tar.gz: ${err.message}`);
  });
  if (problems.length) throw problems[0];
  checkLinksTogether(name, root, links);
  await extractTar({ file, cwd: root, strict: true, preserveOwner: false });
}

async function extractZip(file: string, name: string, root: string) {
  const { unzipSync } = await import('fflate');
  let entries: Record<string, Uint8Array>;
  try {
    entries = unzipSync(readFileSync(file));
  } catch (err) {
    throw new AppError('invalid', `archive ${name} is not a readable .zip: ${(err as Error).message}`);
  }
  const paths = Object.keys(entries);
  const links: Links = new Map();
  for (const path of paths) checkEntry(name, root, path, 'File', links);
  for (const path of paths) {
    const target = resolve(root, path);
    if (path.endsWith('/')) {
      mkdirSync(target, { recursive: true });
      continue;
    }
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, entries[path]!);
    // fflate does not carry Unix modes; release binaries must stay runnable.
    chmodSync(target, 0o755);
  }
}

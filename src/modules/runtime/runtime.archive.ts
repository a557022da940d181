/**
 * Unpacks release archives (.tar.gz with `tar`, .zip with fflate) into a directory, refusing the
 * whole archive when any entry would land outside it: absolute or `..` paths, symlinks or hard
 * links pointing outside, device files. Checked before anything is written.
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { AppError } from '../../platform/errors';

const ALLOWED_TAR_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

function inside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function refuse(archive: string, entry: string, why: string): never {
  throw new AppError('invalid', `archive ${archive} refused: entry "${entry}" ${why}`);
}

/** Throws unless `path` (and, for links, `linkpath`) stays inside `root`. */
function checkEntry(archive: string, root: string, path: string, type: string, linkpath?: string) {
  if (isAbsolute(path) || /^[a-zA-Z]:/.test(path)) refuse(archive, path, 'has an absolute path');
  const target = resolve(root, path);
  if (!inside(root, target)) refuse(archive, path, 'escapes the target directory');
  if (type === 'SymbolicLink' || type === 'Link') {
    if (!linkpath || isAbsolute(linkpath)) refuse(archive, path, `links to an absolute path (${linkpath})`);
    // A symlink resolves from its own folder; a hard link names a path inside the archive.
    const linked = type === 'SymbolicLink' ? resolve(dirname(target), linkpath) : resolve(root, linkpath);
    if (!inside(root, linked)) refuse(archive, path, `links outside the target directory (${linkpath})`);
  }
}

export async function extractArchive(file: string, name: string, dest: string): Promise<void> {
  mkdirSync(dest, { recursive: true });
  const root = resolve(dest);
  if (name.endsWith('.zip')) return extractZip(file, name, root);
  if (!name.endsWith('.tar.gz') && !name.endsWith('.tgz')) throw new AppError('invalid', `unsupported archive type: ${name}`);
  // tar and fflate are imported at first use: they are off the server's start-up path.
  const { list: listTar, extract: extractTar } = await import('tar');
  const problems: Error[] = [];
  await listTar({
    file,
    strict: true,
    onReadEntry: (entry) => {
      try {
        if (!ALLOWED_TAR_TYPES.has(entry.type)) refuse(name, entry.path, `is a ${entry.type}`);
        checkEntry(name, root, entry.path, entry.type, entry.linkpath);
      } catch (err) {
        problems.push(err as Error);
      }
    },
  }).catch((err: Error) => {
    throw new AppError('invalid', `archive ${name} is not a readable .tar.gz: ${err.message}`);
  });
  if (problems.length) throw problems[0];
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
  for (const path of paths) checkEntry(name, root, path, 'File');
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

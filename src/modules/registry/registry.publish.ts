/**
 * Publishing an artifact (`cpd models publish`): list the files, compute size, CRC-32 and SHA-256
 * once, copy the bytes into content-addressed objects, then swap the artifact rows in one
 * transaction. Until that commit the old artifact is served; an interrupted publish leaves at most
 * unreferenced objects, never a half-visible artifact (a re-run reuses them). Objects a republish
 * stops referencing are kept: a download of the old version may still be streaming them.
 */
import { lstat, readdir, realpath, stat } from 'node:fs/promises';
import { basename, join, relative, resolve, sep } from 'node:path';
import { and, eq } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { sha256Hex } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { contentKey, type ObjectStore } from '../../platform/storage';
import { QUANTS, type Quant } from './registry.schemas';
import { type ArtifactFile, assertSlug, parseSdk, REGISTRY_CHANNEL } from './registry.service';
import { artifactFiles, artifacts, models } from './registry.tables';

export interface PublishInput {
  path: string;
  slug: string;
  quant: string;
  sdk: string;
  name?: string;
  family?: string;
  description?: string;
}

/** Progress of the two byte-heavy phases (hashing, then storing), for a progress bar. */
export type PublishProgress = (phase: 'hashing' | 'storing', doneBytes: number, totalBytes: number) => void;

interface LocalFile {
  path: string;
  absolute: string;
  size: number;
}

/** Files under `root`, sorted; symlinks are followed only when they stay inside `root`. */
async function listDirectory(root: string): Promise<LocalFile[]> {
  const realRoot = await realpath(root);
  const out: LocalFile[] = [];
  async function walk(dir: string) {
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const absolute = join(dir, name);
      const rel = relative(root, absolute).split(sep).join('/');
      // In a ZIP entry name `\` is a separator to Windows extractors: `..\..\evil.txt` would land
      // above the folder the user unzips into. Such a name is refused, not silently rewritten.
      if (name.includes('\\'))
        throw new AppError('invalid', `"${rel}": a file name with "\\" cannot go into a ZIP (Windows reads it as a folder separator); rename it`);
      const info = await lstat(absolute);
      if (info.isSymbolicLink()) {
        const target = await realpath(absolute).catch(() => null);
        if (!target || !(target + sep).startsWith(realRoot + sep) || target === realRoot)
          throw new AppError('invalid', `symlink "${rel}" points outside the bundle directory`);
        const targetInfo = await stat(target);
        if (!targetInfo.isFile()) throw new AppError('invalid', `symlink "${rel}" must point to a regular file`);
        out.push({ path: rel, absolute: target, size: targetInfo.size });
      } else if (info.isDirectory()) {
        await walk(absolute);
      } else if (info.isFile()) {
        out.push({ path: rel, absolute, size: info.size });
      } else {
        throw new AppError('invalid', `"${rel}" is not a regular file`);
      }
    }
  }
  await walk(root);
  return out;
}

async function hashFile(file: LocalFile, onBytes: (n: number) => void): Promise<{ crc32: number; sha256: string }> {
  const sha = new Bun.CryptoHasher('sha256');
  let crc32 = 0;
  let seen = 0;
  for await (const chunk of Bun.file(file.absolute).stream()) {
    crc32 = Bun.hash.crc32(chunk, crc32);
    sha.update(chunk);
    seen += chunk.length;
    onBytes(chunk.length);
  }
  if (seen !== file.size) throw new AppError('conflict', `"${file.path}" changed while it was being read`);
  return { crc32, sha256: sha.digest('hex') };
}

/** Checks slug, quant and sdk (throws AppError invalid); the CLI calls it before opening the database. */
export function validatePublishInput(input: PublishInput): { quant: Quant; sdk: { major: number; minor: number } } {
  assertSlug(input.slug);
  if (!(QUANTS as readonly string[]).includes(input.quant)) throw new AppError('invalid', `invalid quant "${input.quant}": use int4, int8 or int326`);
  const sdk = parseSdk(input.sdk);
  if (!sdk) throw new AppError('invalid', `invalid sdk "${input.sdk}": use v<major>.<minor>, for example v1.0`);
  return { quant: input.quant as Quant, sdk };
}

export async function publishArtifact(ctx: AppContext, store: ObjectStore, input: PublishInput, progress: PublishProgress = () => {}) {
  const { quant, sdk } = validatePublishInput(input);
  const root = resolve(input.path);
  const info = await stat(root).catch(() => null);
  if (!info) throw new AppError('invalid', `path "${input.path}" does not exist`);
  if (!info.isFile() && !info.isDirectory()) throw new AppError('invalid', `path "${input.path}" is neither a file nor a directory`);
  const kind = info.isDirectory() ? ('directory' as const) : ('file' as const);
  const local = kind === 'file' ? [{ path: basename(root), absolute: root, size: info.size }] : await listDirectory(root);
  if (local.length === 0) throw new AppError('invalid', `directory "${input.path}" has no files`);
  const total = local.reduce((n, f) => n + f.size, 0);

  let done = 0;
  const files: ArtifactFile[] = [];
  for (const f of local) {
    const { crc32, sha256 } = await hashFile(f, (n) => {
      done += n;
      progress('hashing', done, total);
    });
    files.push({ path: f.path, size: f.size, crc32, sha256, objectKey: contentKey(sha256) });
  }
  done = 0;
  for (const [i, f] of files.entries()) {
    if (!(await store.exists(f.objectKey))) await store.putFile(f.objectKey, local[i]!.absolute);
    done += f.size;
    progress('storing', done, total);
  }

  const contentHash = kind === 'file' ? files[0]!.sha256 : sha256Hex(files.map((f) => `${f.path}\0${f.size}\0${f.sha256}`).join('\n'));
  const artifactId = newId('art');
  const now = ctx.clock.now();
  await ctx.database.db.transaction(async (tx) => {
    const metadata = {
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(input.family !== undefined ? { family: input.family } : {}),
      ...(input.description !== undefined ? { description: input.description } : {}),
    };
    await tx
      .insert(models)
      .values({ slug: input.slug, name: input.name ?? input.slug, family: input.family ?? '', description: input.description ?? '', createdAt: now, updatedAt: now })
      .onConflictDoUpdate({ target: models.slug, set: { ...metadata, updatedAt: now } });
    // Same transaction as the insert: readers see the old artifact until the commit.
    await tx.delete(artifacts).where(and(eq(artifacts.slug, input.slug), eq(artifacts.quant, quant), eq(artifacts.sdk, input.sdk)));
    await tx.insert(artifacts).values({
      id: artifactId,
      slug: input.slug,
      quant,
      sdk: input.sdk,
      sdkMajor: sdk.major,
      sdkMinor: sdk.minor,
      kind,
      sizeBytes: total,
      contentHash,
      createdAt: now,
    });
    await tx.insert(artifactFiles).values(files.map((f, position) => ({ artifactId, position, ...f })));
    await ctx.database.notify(REGISTRY_CHANNEL, input.slug, tx);
  });
  return { id: artifactId, slug: input.slug, quant, sdk: input.sdk, kind, size_bytes: total, files: files.length, content_hash: contentHash };
}

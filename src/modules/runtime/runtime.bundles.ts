/**
 * Model bundles for supervised engines: the registry's directory artifact copied file by file
 * into DATA_DIR/bundles/<slug>-<quant>-<sdk>/, each file checked against its SHA-256. A copy
 * whose `.complete` marker names the artifact's content hash is reused as is.
 */
import { createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { randomBytes } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import type { Artifact, RegistryService } from '../registry';
import type { EngineEntry } from './runtime.engines';
import { bundlesDir } from './runtime.paths';

export type BundleSource = Pick<RegistryService, 'artifactsOf' | 'resolveArtifact' | 'openFile' | 'reload'>;

/** The artifact ENGINES names: the exact (resolved) sdk, else the newest sdk with that quant. */
export async function artifactFor(registry: BundleSource, entry: EngineEntry): Promise<Artifact> {
  if (entry.sdk) return registry.resolveArtifact(entry.slug, entry.quant, entry.sdk);
  const newestOf = () => registry.artifactsOf(entry.slug).find((a) => a.quant === entry.quant);
  // A miss may be a publish whose change notice has not arrived yet: read the catalog once more.
  const newest = newestOf() ?? (await registry.reload().then(newestOf));
  if (!newest) throw new AppError('not_found', `no ${entry.quant} artifact of model ${entry.slug} in the registry`);
  return newest;
}

/** Copies in progress by target folder: two engines on one bundle share a single copy. */
const copying = new Map<string, Promise<string>>();

export function fetchBundle(registry: BundleSource, artifact: Artifact, dataDir: string): Promise<string> {
  const target = join(bundlesDir(dataDir), `${artifact.slug}-${artifact.quant}-${artifact.sdk}`);
  let pending = copying.get(target);
  if (!pending) {
    pending = copyBundle(registry, artifact, target).finally(() => copying.delete(target));
    copying.set(target, pending);
  }
  return pending;
}

async function copyBundle(registry: BundleSource, artifact: Artifact, target: string): Promise<string> {
  if (artifact.kind !== 'directory') throw new AppError('invalid', `${artifact.slug} ${artifact.quant} ${artifact.sdk} is a single file, not a bundle directory`);
  const marker = join(target, '.complete');
  if (existsSync(marker) && readFileSync(marker, 'utf8').trim() === artifact.contentHash) return target;

  const staging = `${target}.partial-${randomBytes(4).toString('hex')}`;
  try {
    for (const file of artifact.files) {
      const dest = resolve(staging, file.path);
      if (!dest.startsWith(staging + sep)) throw new AppError('invalid', `bundle file path escapes the bundle: ${file.path}`);
      mkdirSync(dirname(dest), { recursive: true });
      const sha256 = await copyHashing(registry.openFile(artifact, file.path), dest);
      if (sha256 !== file.sha256) throw new AppError('upstream', `bundle file ${file.path} of ${artifact.slug}: SHA-256 ${sha256} does not match ${file.sha256}`);
    }
    writeFileSync(join(staging, '.complete'), artifact.contentHash);
    rmSync(target, { recursive: true, force: true });
    renameSync(staging, target);
    return target;
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    throw err;
  }
}

async function copyHashing(stream: ReadableStream<Uint8Array>, dest: string): Promise<string> {
  const hash = new Bun.CryptoHasher('sha256');
  const out = createWriteStream(dest);
  try {
    for await (const chunk of stream) {
      hash.update(chunk);
      if (!out.write(chunk)) await new Promise((r) => out.once('drain', r));
    }
  } finally {
    await new Promise<void>((res, rej) => out.end((err?: Error | null) => (err ? rej(err) : res())));
  }
  return hash.digest('hex');
}

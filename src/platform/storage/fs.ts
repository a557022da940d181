/**
 * Local filesystem store (STORAGE_URL=file://…, default DATA_DIR/objects). Links are HMAC-signed
 * with an expiry and served by this server (`serveSigned`), with HEAD and Range.
 */
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { Clock } from '../clock';
import { randomBytes } from '../crypto';
import { AppError } from '../errors';
import { assertKey, type ObjectStore, type PresignOptions } from './object-store';
import { rangeNotSatisfiable, rangeResponseInit } from './range';
import { signPath, verifySignedPath } from './signed-url';

/** Read size of `chunks`: large enough for full loopback throughput, small enough to keep per download. */
const CHUNK_BYTES = 256 * 1024;

/** Where signed object links live; the registry mounts serveSigned under this prefix. */
export const SIGNED_OBJECT_PREFIX = '/api/storage/';

export interface FsStoreOptions {
  root: string;
  publicUrl: string;
  secret: () => string;
  clock: Clock;
}

export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

export function createFsStore(opts: FsStoreOptions) {
  const root = resolve(opts.root);

  /** The file behind a key; the key grammar already forbids escaping, this checks it again. */
  function pathOf(key: string): string {
    const path = resolve(root, 'data', assertKey(key));
    if (!path.startsWith(root + sep)) throw new AppError('invalid', 'invalid object key');
    return path;
  }

  const store: ObjectStore & { pathOf(key: string): string; serveSigned(request: Request, key: string): Promise<Response> } = {
    kind: 'fs',
    pathOf,

    async putFile(key, source) {
      const dest = pathOf(key);
      // Written under tmp/ then renamed: an interrupted copy never appears under its key.
      const tmp = join(root, 'tmp', `${randomBytes(8).toString('hex')}.part`);
      await mkdir(dirname(tmp), { recursive: true });
      await mkdir(dirname(dest), { recursive: true });
      try {
        await Bun.write(tmp, Bun.file(source));
        await rename(tmp, dest);
      } finally {
        await rm(tmp, { force: true });
      }
    },

    async exists(key) {
      return stat(pathOf(key)).then(
        (s) => s.isFile(),
        () => false,
      );
    },

    async delete(key) {
      await rm(pathOf(key), { force: true });
    },

    read(key, start = 0, end) {
      const file = Bun.file(pathOf(key));
      return (end === undefined ? file.slice(start) : file.slice(start, end)).stream();
    },

    async *chunks(key, start, end) {
      const file = await open(pathOf(key), 'r');
      try {
        const buffer = new Uint8Array(Math.min(CHUNK_BYTES, end - start));
        for (let at = start; at < end; ) {
          const { bytesRead } = await file.read(buffer, 0, Math.min(buffer.length, end - at), at);
          if (bytesRead === 0) throw new Error(`object ${key} ends before byte ${end}`);
          at += bytesRead;
          yield buffer.subarray(0, bytesRead);
        }
      } finally {
        await file.close();
      }
    },

    presign(key: string, { filename, ttlMs }: PresignOptions) {
      const path = `${SIGNED_OBJECT_PREFIX}${assertKey(key)}`;
      return opts.publicUrl + signPath(opts.secret(), path, { filename }, ttlMs, opts.clock.now());
    },

    /** Answers a signed link (GET or HEAD, Range-aware); 403 when tampered with or expired. */
    async serveSigned(request, key) {
      const url = new URL(request.url);
      const params = verifySignedPath(opts.secret(), `${SIGNED_OBJECT_PREFIX}${key}`, url.searchParams, opts.clock.now());
      const file = Bun.file(pathOf(key));
      if (!(await file.exists())) throw new AppError('not_found', 'object not found');
      const etag = `"${key.slice(key.lastIndexOf('/') + 1)}"`;
      const init = rangeResponseInit(request, file.size, etag);
      const headers: Record<string, string> = {
        ...init.headers,
        'accept-ranges': 'bytes',
        'content-type': 'application/octet-stream',
        'content-disposition': contentDisposition(params.filename ?? 'download'),
        'cache-control': 'no-store',
        etag,
      };
      if (init.status === 416 && request.method !== 'HEAD') return rangeNotSatisfiable(init.headers);
      if (request.method === 'HEAD') return new Response(null, { status: init.status, headers });
      const { start, end } = init.range!;
      return new Response(file.slice(start, end), { status: init.status, headers });
    },
  };
  return store;
}

export type FsStore = ReturnType<typeof createFsStore>;

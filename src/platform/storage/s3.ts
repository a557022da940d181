/**
 * S3-compatible store (STORAGE_URL=s3://bucket[/prefix]) through Bun.S3Client: multipart upload
 * from a local file, ranged reads, and presigned GET URLs that the client fetches directly.
 */
import { S3Client } from 'bun';
import { assertKey, type ObjectStore } from './object-store';
import { contentDisposition } from './fs';

export interface S3StoreOptions {
  bucket: string;
  prefix: string;
  endpoint: string | null;
  region: string | null;
  accessKeyId: string | null;
  secretAccessKey: string | null;
}

/** `s3://bucket/some/prefix` → bucket and prefix (no leading or trailing slash). */
export function parseS3Url(url: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url);
  if (!m) throw new Error(`not an s3:// URL: ${url}`);
  return { bucket: m[1]!, prefix: m[2]!.replace(/^\/+|\/+$/g, '') };
}

export function createS3Store(opts: S3StoreOptions): ObjectStore {
  const client = new S3Client({
    bucket: opts.bucket,
    ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
    ...(opts.region ? { region: opts.region } : {}),
    ...(opts.accessKeyId ? { accessKeyId: opts.accessKeyId } : {}),
    ...(opts.secretAccessKey ? { secretAccessKey: opts.secretAccessKey } : {}),
  });
  const full = (key: string) => (opts.prefix ? `${opts.prefix}/${assertKey(key)}` : assertKey(key));

  return {
    kind: 's3',
    async putFile(key, path) {
      // A PUT (or a completed multipart upload) is atomic in S3: readers never see a partial object.
      await client.write(full(key), Bun.file(path));
    },
    exists: (key) => client.exists(full(key)),
    async delete(key) {
      await client.delete(full(key));
    },
    read(key, start = 0, end) {
      const file = client.file(full(key));
      return (end === undefined ? file.slice(start) : file.slice(start, end)).stream();
    },
    // Chunks are what the HTTP client reads off the socket: bounded, and fresh each time.
    chunks(key, start, end) {
      return client.file(full(key)).slice(start, end).stream();
    },
    presign(key, { filename, ttlMs }) {
      return client.presign(full(key), {
        method: 'GET',
        expiresIn: Math.max(1, Math.floor(ttlMs / 1000)),
        contentDisposition: contentDisposition(filename),
      });
    },
  };
}

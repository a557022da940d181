/**
 * Object storage behind one interface (DESIGN "Outside systems behind interfaces"): the local
 * filesystem by default, or any S3-compatible service. Keys are checked here once, so no key can
 * ever name a path outside the store, whatever the backend.
 */
import { AppError } from '../errors';

export interface PresignOptions {
  /** Suggested download name (Content-Disposition) where the backend can set it. */
  filename: string;
  ttlMs: number;
}

export interface ObjectStore {
  readonly kind: 'fs' | 's3';
  /** Stores a local file under `key`; the object becomes visible only once complete. */
  putFile(key: string, path: string): Promise<void>;
  exists(key: string): Promise<boolean>;
  delete(key: string): Promise<void>;
  /** Bytes [start, end) of an object (the whole object by default), streamed. */
  read(key: string, start?: number, end?: number): ReadableStream<Uint8Array>;
  /**
   * Bytes [start, end) of an object for a consumer that is done with each chunk before it asks
   * for the next (the ZIP writer): a chunk may be overwritten by the next one (the fs backend
   * reads every chunk into one reused buffer, so a multi-GiB stream makes no garbage).
   */
  chunks(key: string, start: number, end: number): AsyncIterable<Uint8Array>;
  /** A short-lived URL that answers GET, HEAD and Range for the object. */
  presign(key: string, opts: PresignOptions): string;
}

/** Lower-case segments that start with a letter or digit: never empty, never "." or "..", never absolute. */
const KEY = /^[a-z0-9][a-z0-9._-]*(?:\/[a-z0-9][a-z0-9._-]*)*$/;

export function isValidKey(key: string): boolean {
  return key.length <= 512 && KEY.test(key);
}

export function assertKey(key: string): string {
  if (!isValidKey(key)) throw new AppError('invalid', 'invalid object key');
  return key;
}

/** Content-addressed key for a blob: identical content is stored once and a key never names a path. */
export function contentKey(sha256: string): string {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new AppError('invalid', 'not a SHA-256 hex digest');
  return `sha256/${sha256.slice(0, 2)}/${sha256}`;
}

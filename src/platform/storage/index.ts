import type { Clock } from '../clock';
import type { PlatformConfig } from '../platform-config';
import { createFsStore, type FsStore } from './fs';
import type { ObjectStore } from './object-store';
import { createS3Store, parseS3Url } from './s3';

export { assertKey, contentKey, isValidKey, type ObjectStore, type PresignOptions } from './object-store';
export { createFsStore, contentDisposition, SIGNED_OBJECT_PREFIX, type FsStore } from './fs';
export { createS3Store, parseS3Url } from './s3';
export { parseRange, rangeNotSatisfiable, rangeResponseInit, type ByteRange } from './range';
export { signPath, verifySignedPath } from './signed-url';

/** The store STORAGE_URL names: file://PATH (links served here) or s3://bucket/prefix. */
export function openObjectStore(config: PlatformConfig, clock: Clock): ObjectStore | FsStore {
  if (config.storageUrl.startsWith('s3://')) return createS3Store({ ...parseS3Url(config.storageUrl), ...config.s3 });
  return createFsStore({ root: config.storageUrl.slice('file://'.length), publicUrl: config.publicUrl, secret: config.secretKey, clock });
}

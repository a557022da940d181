import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export const sha256Hex = (value: string | Uint8Array) => createHash('sha256').update(value).digest('hex');

export const hmacHex = (key: string, value: string) => createHmac('sha256', key).update(value).digest('hex');

/** Constant-time string comparison (hashes both sides so lengths never leak). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform random base62 string (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/**
 * Time-ordered id: `prefix_` + 10 chars of millisecond time + 16 random chars, all base62-sortable
 * within one alphabet, so ids sort by creation time (useful for stable cursors).
 */
export function newId(prefix: string): string {
  let t = Date.now();
  let time = '';
  for (let i = 0; i < 9; i++) {
    time = BASE62[t % 62] + time;
    t = Math.floor(t / 62);
  }
  return `${prefix}_${time}${randomBase62(16)}`;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Bytes from the operating system's CSPRNG, drawn 4 KiB at a time and each handed out once (as
 * Node's randomUUID does): every request makes an id, and a `randomBytes` call per id was 0.8 µs
 * of the 1 µs it took (the pool: 0.15 µs).
 */
const pool = new Uint8Array(4096);
let next = pool.length;

/** Uniform random base62 string (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    if (next === pool.length) {
      crypto.getRandomValues(pool);
      next = 0;
    }
    const byte = pool[next++]!;
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

/**
 * Time-ordered id: `prefix_` + 9 chars of millisecond time + 16 random chars, all base62-sortable
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

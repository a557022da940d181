/**
 * HMAC-signed, expiring links served by this server (local object store, ZIP streams). The
 * signature covers the path and every parameter, so nothing in the link can be changed.
 */
import { safeEqual } from '../crypto';
import { AppError } from '../errors';

/**
 * HMAC-SHA256 hex from one keyed hasher per secret, copied for each message: a fresh HMAC per
 * call (key setup) and URLSearchParams were most of the cost of signing, which every 302
 * download pays.
 */
let keyed: { secret: string; hasher: Bun.CryptoHasher } | null = null;
function hmacHex(secret: string, message: string): string {
  if (keyed?.secret !== secret) keyed = { secret, hasher: new Bun.CryptoHasher('sha256', secret) };
  return keyed.hasher.copy().update(message).digest('hex');
}

function payload(path: string, params: Record<string, string>): string {
  let out = path;
  for (const k of Object.keys(params).sort()) out += `\n${k}=${params[k]}`;
  return out;
}

/** `path?…&expires=…&signature=…` valid for ttlMs from `now`. */
export function signPath(secret: string, path: string, params: Record<string, string>, ttlMs: number, now: Date): string {
  const all = { ...params, expires: String(Math.floor((now.getTime() + ttlMs) / 1000)) };
  let query = '';
  for (const k in all) query += `${k}=${encodeURIComponent(all[k as keyof typeof all])}&`;
  return `${path}?${query}signature=${hmacHex(secret, payload(path, all))}`;
}

/** Checks a signed link; returns its parameters (without signature) or throws 403. */
export function verifySignedPath(secret: string, path: string, query: URLSearchParams, now: Date): Record<string, string> {
  const params: Record<string, string> = {};
  for (const [k, v] of query) if (k !== 'signature') params[k] = v;
  const signature = query.get('signature') ?? '';
  if (!safeEqual(signature, hmacHex(secret, payload(path, params)))) throw new AppError('forbidden', 'invalid link signature');
  const expires = Number(params.expires);
  if (!Number.isFinite(expires) || expires * 1000 < now.getTime()) throw new AppError('forbidden', 'link expired');
  return params;
}

/**
 * HMAC-signed, expiring links served by this server (local object store, ZIP streams). The
 * signature covers the path and every parameter, so nothing in the link can be changed.
 */
import { hmacHex, safeEqual } from '../crypto';
import { AppError } from '../errors';

function payload(path: string, params: Record<string, string>): string {
  const fields = Object.keys(params)
    .sort()
    .map((k) => `${k}=${params[k]}`);
  return [path, ...fields].join('\n');
}

/** `path?…&expires=…&signature=…` valid for ttlMs from `now`. */
export function signPath(secret: string, path: string, params: Record<string, string>, ttlMs: number, now: Date): string {
  const all = { ...params, expires: String(Math.floor((now.getTime() + ttlMs) / 1000)) };
  const signature = hmacHex(secret, payload(path, all));
  return `${path}?${new URLSearchParams({ ...all, signature })}`;
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

/**
 * The console's only way to the server: the same JSON API curl users call. The session is the
 * HttpOnly `cpd_session` cookie the server set at sign-in, so no token is ever visible to scripts;
 * writes send JSON with fetch, which carries the Origin header the server checks.
 */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function api<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: { accept: 'application/json', ...headers } };
  if (body !== undefined) {
    init.headers = { ...init.headers, 'content-type': 'application/json' };
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (res.status === 204) return undefined as T;
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    // A session that ended (logout elsewhere, disabled account) sends a console page back to sign-in.
    if (res.status === 401 && !signingOut && location.pathname.startsWith('/console'))
      location.assign(`/login?expired=1&next=${encodeURIComponent(location.pathname + location.search)}`);
    throw new ApiError(res.status, typeof data?.error === 'string' ? data.error : res.statusText);
  }
  return data as T;
}

/** Set while logging out, so a page's poll answered 401 meanwhile does not send the browser to /login?next=… instead. */
let signingOut = false;

export async function logOut() {
  signingOut = true;
  await api('POST', '/api/auth/logout').catch(() => {});
  location.assign('/login');
}

export const get = <T>(path: string) => api<T>('GET', path);

/** `path?k=v…` leaving out empty values. */
export function withQuery(path: string, query: Record<string, string | number | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

export const newIdempotencyKey = () => crypto.randomUUID();

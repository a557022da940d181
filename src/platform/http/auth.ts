/**
 * The one auth layer. A route declares the credentials it accepts, `{ auth: ['session', 'key'] }`,
 * and gets `caller`; no module parses Authorization itself.
 *   session: `Authorization: Bearer <session token>` or the `cpd_session` cookie   (S)
 *   query:   `?token=<session token>`, only on link downloads                        (Q)
 *   key:     `Authorization: Bearer bfvk-…`                                          (K)
 *   admin:   a session whose account has the admin role (403 otherwise)
 */
import { Elysia } from 'elysia';
import { AppError } from '../errors';
import { admit, CREDENTIALS_DETAIL, passOf } from './credential-gate';
import { requireSameOriginForCookie } from './origin';

export type AuthMode = 'session' | 'query' | 'key' | 'admin';

export interface Caller {
  userId: string;
  email: string | null;
  isAdmin: boolean;
  via: 'session' | 'cookie' | 'query' | 'key';
  sessionId: string | null;
  keyId: string | null;
  /**
   * An organization's key: the member who made it. userId is then the organization (whose wallet
   * pays); such a key calls models but reads none of the organization's records.
   */
  member?: string;
}

/**
 * Whose records (usage, captures) the caller reads: its own account. An organization's key reads
 * none of the organization's (403): those are for its owners and admins, signed in.
 */
export function recordsOwner(caller: Caller): string {
  if (caller.member !== undefined) throw new AppError('forbidden', "an organization's key cannot read the organization's records");
  return caller.userId;
}

/** Implemented by the accounts module: turns a presented secret into a caller, or null. */
export interface CallerResolver {
  callerForSession(token: string): Promise<Caller | null>;
  callerForKey(key: string): Promise<Caller | null>;
}

export const SESSION_COOKIE = 'cpd_session';
export const API_KEY_PREFIX = 'bfvk-';

function bearer(request: Request): string | null {
  const header = request.headers.get('authorization');
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}

function cookieValue(request: Request, name: string): string | null {
  const header = request.headers.get('cookie');
  if (!header) return null;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return decodeCookie(part.slice(i + 1).trim());
  }
  return null;
}

/** A malformed percent-encoding ("%E0%A4%A") is no credential: null, so the caller gets 401. */
function decodeCookie(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

function queryToken(request: Request): string | null {
  const q = request.url.indexOf('?');
  return q === -1 ? null : new URLSearchParams(request.url.slice(q + 1)).get('token');
}

/** Resolves the caller for the given modes, or throws 401/403. Exported for non-Elysia paths. */
export async function resolveCaller(resolver: CallerResolver, request: Request, modes: readonly AuthMode[]): Promise<Caller> {
  const wantsSession = modes.includes('session') || modes.includes('admin');
  const token = bearer(request);
  let caller: Caller | null = null;
  if (token?.startsWith(API_KEY_PREFIX)) {
    if (modes.includes('key')) caller = await resolver.callerForKey(token);
  } else if (token) {
    if (wantsSession) caller = await resolver.callerForSession(token);
  } else {
    const cookie = wantsSession ? cookieValue(request, SESSION_COOKIE) : null;
    const query = modes.includes('query') ? queryToken(request) : null;
    if (cookie) {
      caller = await resolver.callerForSession(cookie);
      if (caller) caller = { ...caller, via: 'cookie' };
    }
    if (!caller && query) {
      caller = await resolver.callerForSession(query);
      if (caller) caller = { ...caller, via: 'query' };
    }
  }
  if (!caller) throw new AppError('unauthorized', 'missing or invalid credentials');
  if (modes.includes('admin') && !caller.isAdmin) throw new AppError('forbidden', 'admin role required');
  return caller;
}

/**
 * The `auth` macro. The caller is resolved before the body is read, by the credential gate
 * (platform/http/credential-gate.ts, which runs `authenticate` for the modes the route declares
 * here): without a credential the answer is 401 whatever the body, and before it arrives. The
 * macro's transform checks only a request the gate did not place. A cookie-authenticated unsafe
 * request must also come from PUBLIC_URL's origin (platform/http/origin.ts).
 */
/** The OpenAPI security schemes (declared in app.ts) a route's modes accept: a bearer token always, the session cookie for console routes. */
const securityOf = (modes: readonly AuthMode[]) => [{ bearer: [] }, ...(modes.includes('session') || modes.includes('admin') ? [{ session: [] }] : [])];

export const authPlugin = (resolver: CallerResolver, publicOrigin: string) =>
  new Elysia({ name: 'cpd/auth' }).macro({
    auth: (modes: AuthMode[]) => ({
      async transform({ request }) {
        await admit(request, () => authenticate(resolver, publicOrigin, request, modes));
      },
      resolve: ({ request }) => ({ caller: passOf<Caller>(request) }),
      // Also tells the credential gate (and readers of the OpenAPI document) what the route accepts.
      detail: { [CREDENTIALS_DETAIL]: modes, security: securityOf(modes) } as Record<string, unknown>,
    }),
  });

/** The caller for `modes`, a cookie-authenticated unsafe request only from PUBLIC_URL's origin; else 401/403. */
export async function authenticate(resolver: CallerResolver, publicOrigin: string, request: Request, modes: readonly AuthMode[]): Promise<Caller> {
  const caller = await resolveCaller(resolver, request, modes);
  if (caller.via === 'cookie') requireSameOriginForCookie(request, publicOrigin);
  return caller;
}

/**
 * Cross-site request forgery defences, by origin. A browser attaches the `cpd_session` cookie to
 * requests another site makes it send; it also says where they come from (`Origin`,
 * `Sec-Fetch-Site`), which that site cannot forge. Bearer-authenticated requests carry their
 * credential explicitly and need no such check.
 */
import { Elysia } from 'elysia';
import { AppError } from '../errors';

export const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Origin equals PUBLIC_URL's origin, or the browser says the request is same-origin. */
export function fromPublicOrigin(request: Request, publicOrigin: string): boolean {
  const origin = request.headers.get('origin');
  if (origin !== null) return origin === publicOrigin;
  return request.headers.get('sec-fetch-site') === 'same-origin';
}

/** For a cookie-authenticated request: an unsafe method must come from this site (403 otherwise). */
export function requireSameOriginForCookie(request: Request, publicOrigin: string) {
  if (UNSAFE_METHODS.has(request.method) && !fromPublicOrigin(request, publicOrigin))
    throw new AppError('forbidden', `cross-site request refused: a request signed in by cookie must come from ${publicOrigin} (Origin header)`);
}

/**
 * Every unsafe request without an Authorization header that a browser marks as coming from
 * another site is refused, signed in or not: that covers the routes that set the cookie (a
 * forged login would sign the victim into the attacker's account). Servers and curl send no
 * Origin and are not affected; payment providers' notifications come from servers.
 */
export const foreignOriginGuard = (publicOrigin: string) =>
  new Elysia({ name: 'cpd/foreign-origin' }).onRequest(({ request }) => {
    if (!UNSAFE_METHODS.has(request.method) || request.headers.has('authorization')) return;
    const origin = request.headers.get('origin');
    const site = request.headers.get('sec-fetch-site');
    if ((origin !== null && origin !== publicOrigin) || (origin === null && (site === 'cross-site' || site === 'same-site')))
      throw new AppError('forbidden', `cross-site request refused: requests from ${origin ?? 'another site'} are not accepted here`);
  });

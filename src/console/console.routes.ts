/**
 * The web console's HTTP side: the hashed assets under /assets/*, the one document behind /login,
 * /signup, the pages of mailed links (/forgot-password, /reset-password, /verify-email) and
 * /console/*, and the OpenAPI UI at /api/docs. Everything the console shows or changes goes
 * through the JSON API; these routes only hand the browser the program.
 *
 * /console/* without a live session redirects to /login (a disabled account's sessions are gone,
 * so its next page load lands there); /console/admin/* needs the admin role.
 */
import { Elysia } from 'elysia';
import type { Config } from '../config';
import { type CallerResolver, SESSION_COOKIE, resolveCaller } from '../platform/http/auth';
import { AppError } from '../platform/errors';
import { ASSET_PREFIX, assetResponse } from './console.assets';
import { HTML_HEADERS, apiDocsDocument, chooseLanguage, consoleDocument } from './console.shell';

export interface ConsoleRoutesDeps {
  config: Config;
  resolver: CallerResolver;
  /** Absolute path of the OpenAPI JSON document. */
  specPath: string;
}

export const consoleRoutes = ({ config, resolver, specPath }: ConsoleRoutesDeps) => {
  const page = (request: Request) =>
    new Response(
      consoleDocument({
        language: chooseLanguage(config.site, request.headers.get('cookie'), request.headers.get('accept-language')),
        site: config.site,
        currency: config.currency,
      }),
      { headers: HTML_HEADERS },
    );
  const toLogin = (request: Request) => {
    const url = new URL(request.url);
    // A session cookie that no longer signs in means the session ended: the sign-in page says so.
    const expired = new RegExp(`(?:^|;\\s*)${SESSION_COOKIE}=[^;\\s]`).test(request.headers.get('cookie') ?? '') ? 'expired=1&' : '';
    return new Response(null, {
      status: 303,
      headers: { location: `/login?${expired}next=${encodeURIComponent(url.pathname + url.search)}`, 'cache-control': 'no-store' },
    });
  };
  const consolePage = async (request: Request, admin: boolean) => {
    try {
      await resolveCaller(resolver, request, [admin ? 'admin' : 'session']);
    } catch (e) {
      if (e instanceof AppError && e.kind === 'forbidden')
        return new Response(null, { status: 303, headers: { location: '/console', 'cache-control': 'no-store' } });
      if (e instanceof AppError && e.kind === 'unauthorized') return toLogin(request);
      throw e;
    }
    return page(request);
  };
  const hide = { detail: { hide: true } };

  return (
    new Elysia({ name: 'cpd/console' })
      .get(
        `${ASSET_PREFIX}:name`,
        ({ params, request }) => {
          const response = assetResponse(params.name, request.headers.get('accept-encoding'));
          if (!response) throw new AppError('not_found', 'no such asset');
          return response;
        },
        hide,
      )
      // The site has no icon: say so (204) instead of a 404 on every page that does not name one, like the sandbox checkout.
      .get('/favicon.ico', () => new Response(null, { status: 204, headers: { 'cache-control': 'public, max-age=86400' } }), hide)
      .get('/api/docs', () => new Response(apiDocsDocument(specPath), { headers: HTML_HEADERS }), hide)
      .get('/login', ({ request }) => page(request), hide)
      .get('/signup', ({ request }) => page(request), hide)
      // The pages behind mailed links: the token is in the query, no session is needed.
      .get('/forgot-password', ({ request }) => page(request), hide)
      .get('/reset-password', ({ request }) => page(request), hide)
      .get('/verify-email', ({ request }) => page(request), hide)
      .get('/console', ({ request }) => consolePage(request, false), hide)
      .get('/console/admin', ({ request }) => consolePage(request, true), hide)
      .get('/console/admin/*', ({ request }) => consolePage(request, true), hide)
      .get('/console/*', ({ request }) => consolePage(request, false), hide)
  );
};

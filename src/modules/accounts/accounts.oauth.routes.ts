/**
 * Sign-in with OAuth/OpenID providers and the linked identities (docs/accounts/oauth.md):
 *   GET  /api/auth/oauth/{provider}            302 to the provider (a sign-in)
 *   POST /api/auth/oauth/{provider}/link       (session) {url}: the console sends the browser there to link
 *   GET  /api/auth/oauth/{provider}/callback   cpd_session + 302 /console, or {token, user} for Accept: application/json;
 *        an account with 2FA gets the login's challenge instead (302 /login#two_factor=…, or the JSON)
 *   GET  /api/auth/identities, DELETE /api/auth/identities/{id}
 * A failed callback is 4xx {error} for a JSON caller; a browser is sent back to /login (or, when
 * linking, to the account page) with `?oauth_error=…`, since a provider's redirect lands there.
 */
import { type Cookie, Elysia, t } from 'elysia';
import type { Server } from 'bun';
import type { Config } from '../../config';
import { type authPlugin, SESSION_COOKIE } from '../../platform/http/auth';
import { clientAddress } from '../../platform/http/client-address';
import type { TokenBucketLimiter } from '../../platform/http/rate-limit';
import type { createIdentities } from './accounts.identities';
import { isBrowserToken, newBrowserToken, type OAuth, OAuthCallbackError } from './accounts.oauth';
import type { AccountsService } from './accounts.service';
import * as s from './accounts.schemas';

/** Binds a sign-in to the browser that started it; only the callback path reads it. */
const BROWSER_COOKIE = 'cpd_oauth';

export interface OAuthRoutesDeps {
  accounts: AccountsService;
  oauth: OAuth;
  identities: ReturnType<typeof createIdentities>;
  auth: ReturnType<typeof authPlugin>;
  config: Config;
  /** oauth_start, per client address: each start stores a state row until its callback or expiry. */
  startLimiter: TokenBucketLimiter;
}

const ProviderParams = t.Object({ provider: t.String({ minLength: 1, maxLength: 40 }) });
const Identity = t.Object({ id: t.String(), provider: t.String(), email: t.Nullable(t.String()), created_at: t.String() });

export const oauthRoutes = ({ accounts, oauth, identities, auth, config, startLimiter }: OAuthRoutesDeps) => {
  const secure = config.publicUrl.startsWith('https:');
  type Cookies = Record<string, Cookie<unknown>>;
  /** The browser's binding: kept while it lives, so two sign-ins started in two tabs both finish. */
  const browserToken = (cookie: Cookies) => {
    const current = cookie[BROWSER_COOKIE]!.value;
    const token = isBrowserToken(current) ? current : newBrowserToken();
    cookie[BROWSER_COOKIE]!.set({ value: token, httpOnly: true, sameSite: 'lax', path: '/api/auth/oauth', secure, maxAge: 600 });
    return token;
  };
  const setSession = (cookie: Cookies, token: string) =>
    cookie[SESSION_COOKIE]!.set({
      value: token,
      httpOnly: true,
      sameSite: 'lax',
      path: '/',
      secure,
      maxAge: Math.floor(config.sessionTtlMs / 1000),
    });
  const limitStart = (request: Request, server: Server<unknown> | null) =>
    startLimiter.enforce(`ip:${clientAddress(request, server, config.trustProxy)}`, 1, 'too many sign-ins started; try again later');
  const wantsJson = (request: Request) => /application\/json/i.test(request.headers.get('accept') ?? '');

  return new Elysia({ name: 'cpd/accounts-oauth', detail: { tags: ['accounts'] } })
    .use(auth)
    .get(
      '/api/auth/oauth/:provider',
      async ({ params, cookie, redirect, request, server }) => {
        limitStart(request, server as Server<unknown> | null);
        return redirect(await oauth.begin(params.provider, browserToken(cookie), null), 302);
      },
      { params: ProviderParams, detail: { summary: 'Sign in with a provider: 302 to it (state, PKCE, nonce)' } },
    )
    .post(
      '/api/auth/oauth/:provider/link',
      async ({ caller, params, cookie, request, server }) => {
        limitStart(request, server as Server<unknown> | null);
        return { url: await oauth.begin(params.provider, browserToken(cookie), caller.userId) };
      },
      {
        auth: ['session'],
        params: ProviderParams,
        response: { 200: t.Object({ url: t.String() }) },
        detail: { summary: 'Link a provider to your account: the URL to send the browser to' },
      },
    )
    .get(
      '/api/auth/oauth/:provider/callback',
      async ({ params, request, server, cookie, redirect }) => {
        const json = wantsJson(request);
        const query = new URL(request.url).searchParams;
        const browser = cookie[BROWSER_COOKIE]!.value;
        try {
          const result = await oauth.finish(params.provider, query, isBrowserToken(browser) ? browser : null);
          if (result.kind === 'linked')
            return json ? { linked: result.provider } : redirect(`/console/account?linked=${result.provider}`, 302);
          const signedIn = await accounts.signInProven(result.userId, {
            address: clientAddress(request, server as Server<unknown> | null, config.trustProxy),
            userAgent: request.headers.get('user-agent'),
          });
          if (json) {
            if ('token' in signedIn) setSession(cookie, signedIn.token);
            return signedIn;
          }
          if (!('token' in signedIn)) return redirect(`/login#two_factor=${encodeURIComponent(signedIn.challenge_token)}`, 302);
          setSession(cookie, signedIn.token);
          return redirect('/console', 302);
        } catch (err) {
          if (!(err instanceof OAuthCallbackError)) throw err;
          if (json) throw err.error;
          return redirect(`${err.linking ? '/console/account' : '/login'}?oauth_error=${encodeURIComponent(err.error.message)}`, 302);
        }
      },
      { params: ProviderParams, detail: { summary: 'The provider sends the browser back here' } },
    )
    .get('/api/auth/identities', ({ caller }) => identities.list(caller.userId), {
      auth: ['session'],
      response: { 200: t.Array(Identity) },
      detail: { summary: 'Sign-in providers linked to your account' },
    })
    .delete(
      '/api/auth/identities/:id',
      async ({ caller, params, set }) => {
        await identities.unlink(caller.userId, params.id);
        set.status = 204;
      },
      { auth: ['session'], params: s.IdParams, detail: { summary: 'Unlink a sign-in provider' } },
    );
};

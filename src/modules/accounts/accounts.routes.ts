/**
 * /api/auth/* and /api/api-keys. Handlers are thin: the service does the work;
 * here we only read the client address, set the session cookie and pick the status.
 */
import { type Cookie, Elysia } from 'elysia';
import type { Server } from 'bun';
import type { Config } from '../../config';
import { type authPlugin, SESSION_COOKIE } from '../../platform/http/auth';
import { clientAddress } from '../../platform/http/client-address';
import { chooseLanguage } from '../../platform/http/language';
import type { KeyPolicy } from '../metering';
import type { AccountsService, RequestMeta } from './accounts.service';
import * as s from './accounts.schemas';

export interface AccountsRoutesDeps {
  accounts: AccountsService;
  auth: ReturnType<typeof authPlugin>;
  config: Config;
  /** Which models a key may name, and what keys spent (the router's). */
  keyPolicy: KeyPolicy;
}

/** The cpd_session cookie every way of signing in sets: it lives as long as the session; Secure whenever the site is served over https. */
export function sessionCookie(config: Pick<Config, 'publicUrl' | 'sessionTtlMs'>) {
  const cookieOptions = {
    httpOnly: true,
    sameSite: 'lax',
    path: '/',
    secure: config.publicUrl.startsWith('https:'),
    maxAge: Math.floor(config.sessionTtlMs / 1000),
  } as const;
  return {
    setSessionCookie: (cookie: Record<string, Cookie<unknown>>, token: string) => cookie[SESSION_COOKIE]!.set({ value: token, ...cookieOptions }),
    clearSessionCookie: (cookie: Record<string, Cookie<unknown>>) => cookie[SESSION_COOKIE]!.set({ value: '', ...cookieOptions, maxAge: 0 }),
  };
}

export const accountsRoutes = ({ accounts, auth, config, keyPolicy }: AccountsRoutesDeps) => {
  const meta = (request: Request, server: Server<unknown> | null): RequestMeta => ({
    address: clientAddress(request, server, config.trustProxy),
    userAgent: request.headers.get('user-agent'),
  });
  const { setSessionCookie, clearSessionCookie } = sessionCookie(config);

  return new Elysia({ name: 'cpd/accounts', detail: { tags: ['accounts'] } })
    .use(auth)
    .post(
      '/api/auth/register',
      async ({ body, request, server, cookie, set }) => {
        const locale = chooseLanguage(config.site, request.headers.get('cookie'), request.headers.get('accept-language'));
        const result = await accounts.register(body, { ...meta(request, server), locale });
        if ('pending' in result) {
          // EMAIL_VERIFICATION=required: the same answer for a new and a taken address (docs/accounts/mail.md).
          set.status = 202;
          return {};
        }
        setSessionCookie(cookie, result.token);
        set.status = 201;
        return result;
      },
      { body: s.RegisterBody, response: { 201: s.SignedIn, 202: s.Accepted }, detail: { summary: 'Create an account (signed in at once, or 202 while the address is verified)' } },
    )
    .post(
      '/api/auth/login',
      async ({ body, request, server, cookie }) => {
        const result = await accounts.login(body, meta(request, server));
        if ('token' in result) setSessionCookie(cookie, result.token);
        return result;
      },
      { body: s.LoginBody, response: { 200: s.LoginResponse }, detail: { summary: 'Sign in with email or phone and password (a 2FA challenge when on)' } },
    )
    .post(
      '/api/auth/2fa/verify',
      async ({ body, request, server, cookie }) => {
        const signedIn = await accounts.verifyChallenge(body, meta(request, server));
        setSessionCookie(cookie, signedIn.token);
        return signedIn;
      },
      { body: s.VerifyBody, response: { 200: s.SignedIn }, detail: { summary: 'Finish a sign-in with the 2FA code' } },
    )
    .post('/api/auth/2fa/setup', ({ caller }) => accounts.setupTwoFactor(caller.userId), { auth: ['session'], response: { 200: s.TwoFactorSetup }, detail: { summary: 'Start setting up 2FA: a new TOTP secret' } })
    .post('/api/auth/2fa/enable', ({ caller, body, request, server }) => accounts.enableTwoFactor(caller.userId, body.code, meta(request, server)), {
      auth: ['session'],
      body: s.CodeBody,
      response: { 200: s.TwoFactorEnabled },
      detail: { summary: 'Turn 2FA on with a code of the new secret (answers recovery codes)' },
    })
    .post(
      '/api/auth/2fa/disable',
      async ({ caller, body, request, server, set }) => {
        await accounts.disableTwoFactor(caller.userId, body.code, meta(request, server));
        set.status = 204;
      },
      { auth: ['session'], body: s.CodeBody, detail: { summary: 'Turn 2FA off with a current code' } },
    )
    .get('/api/auth/me', ({ caller }) => accounts.me(caller.userId), { auth: ['session'], response: { 200: s.Me }, detail: { summary: 'The signed-in user' } })
    .post(
      '/api/auth/logout',
      async ({ caller, cookie, set }) => {
        await accounts.deleteSession(caller.userId, caller.sessionId!);
        clearSessionCookie(cookie);
        set.status = 204;
      },
      { auth: ['session'], detail: { summary: 'Sign out: ends this session' } },
    )
    .post(
      '/api/auth/password',
      async ({ caller, body, request, server, set }) => {
        await accounts.changePassword(caller, body, meta(request, server));
        set.status = 204;
      },
      { auth: ['session'], body: s.ChangePasswordBody, detail: { summary: 'Change your password (ends your other sessions)' } },
    )
    .get('/api/auth/sessions', ({ caller }) => accounts.listSessions(caller.userId, caller.sessionId), { auth: ['session'], response: { 200: s.SessionList }, detail: { summary: 'Your sessions' } })
    .delete(
      '/api/auth/sessions/:id',
      async ({ caller, params, set }) => {
        await accounts.deleteSession(caller.userId, params.id);
        set.status = 204;
      },
      { auth: ['session'], params: s.IdParams, detail: { summary: 'End one of your sessions' } },
    )
    .get('/api/api-keys', ({ caller, query }) => accounts.listApiKeys(caller.userId, keyPolicy, query.org_id), {
      auth: ['session'],
      query: s.ApiKeyListQuery,
      response: { 200: s.ApiKeyList },
      detail: { summary: "Your live personal API keys, or an organization's (org_id) you may see" },
    })
    .post(
      '/api/api-keys',
      async ({ caller, body, set }) => {
        const created = await accounts.createApiKey(caller.userId, body, keyPolicy);
        set.status = 201;
        return created;
      },
      { auth: ['session'], body: s.ApiKeyBody, response: { 201: s.CreatedApiKey }, detail: { summary: 'Create an API key (the key is shown this once)' } },
    )
    .patch('/api/api-keys/:id', ({ caller, params, body }) => accounts.updateApiKey(caller.userId, params.id, body, keyPolicy), {
      auth: ['session'],
      params: s.IdParams,
      body: s.ApiKeyPatch,
      response: { 200: s.ApiKey },
      detail: { summary: "Change an API key's name or limits" },
    })
    .delete(
      '/api/api-keys/:id',
      async ({ caller, params, set }) => {
        await accounts.revokeApiKey(caller.userId, params.id);
        set.status = 204;
      },
      { auth: ['session'], params: s.IdParams, detail: { summary: "Revoke an API key (yours, or an organization's you own or administer)" } },
    );
};

/**
 * The OAuth and OpenID Connect providers behind sign-in: where to send the browser, and what the
 * callback proves. GitHub is plain OAuth 2 (arctic) plus its REST API for the user and the
 * verified primary email; Google and any other issuer are OpenID providers (openid-client), found
 * by discovery, whose id_token is checked (signature by the JWKS, iss, aud, exp, nonce).
 */
import { ArcticFetchError, CodeChallengeMethod, OAuth2Client } from 'arctic';
import * as oidc from 'openid-client';
import type { OAuthSettings } from '../../config-accounts';
import { AppError } from '../../platform/errors';

export const PROVIDER_IDS = ['github', 'google', 'oidc'] as const;
export type ProviderId = (typeof PROVIDER_IDS)[number];

/** Who the provider says signed in. `emailVerified`: the provider vouches the person owns `email`. */
export interface ProviderProfile {
  subject: string;
  email: string | null;
  emailVerified: boolean;
}

export interface Checks {
  state: string;
  codeVerifier: string;
  nonce: string | null;
}

export interface Provider {
  /** OpenID providers bind the id_token to a nonce; GitHub has none. */
  usesNonce: boolean;
  authorizationUrl(checks: Checks): Promise<URL>;
  /** `callback`: the callback URL as registered, with the query the provider sent. */
  profile(callback: URL, checks: Checks): Promise<ProviderProfile>;
}

const isLoopback = (url: URL) => ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);

/** A provider answer we cannot use: 400 naming the check that failed, or 502 when the provider did not answer. */
function refused(err: unknown): never {
  if (err instanceof AppError) throw err;
  const message = err instanceof Error ? err.message : String(err);
  // A failed check (state, nonce, signature, a bad code) is the caller's 400; a provider that does not answer is a 502.
  if (err instanceof ArcticFetchError || /unable to connect|ECONNREFUSED|ConnectionRefused|fetch failed|timed? ?out|aborted/i.test(message))
    throw new AppError('upstream', 'the sign-in provider cannot be reached; try again later');
  // openid-client's own cause names the check that failed (the nonce, aud, iss claim…).
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
  throw new AppError('invalid', `the sign-in provider's answer was refused: ${`${message}${cause}`.slice(0, 200)}`);
}

function githubProvider(settings: NonNullable<OAuthSettings['github']>, redirectUri: string): Provider {
  const client = new OAuth2Client(settings.clientId, settings.clientSecret, redirectUri);
  const web = settings.authUrl.replace(/\/+$/, '');
  const api = settings.apiUrl.replace(/\/+$/, '');
  const getJson = async (path: string, accessToken: string) => {
    const res = await fetch(`${api}${path}`, {
      headers: {
        authorization: `Bearer ${accessToken}`,
        accept: 'application/vnd.github+json',
        'user-agent': 'cpd',
        'x-github-api-version': '2022-11-28',
      },
      signal: AbortSignal.timeout(10_000),
    });
    if (!res.ok) throw new AppError('upstream', `GitHub answered ${res.status} to ${path}`);
    return (await res.json()) as unknown;
  };
  return {
    usesNonce: false,
    async authorizationUrl({ state, codeVerifier }) {
      // read:user for the id, user:email for /user/emails (the verified flags).
      return client.createAuthorizationURLWithPKCE(`${web}/login/oauth/authorize`, state, CodeChallengeMethod.S256, codeVerifier, [
        'read:user',
        'user:email',
      ]);
    },
    async profile(callback, { codeVerifier }) {
      const code = callback.searchParams.get('code');
      if (!code) throw new AppError('invalid', 'the callback carries no code');
      try {
        // GitHub answers a bad code with 200 {error}: accessToken() throws then.
        const tokens = await client.validateAuthorizationCode(`${web}/login/oauth/access_token`, code, codeVerifier);
        const accessToken = tokens.accessToken();
        const user = (await getJson('/user', accessToken)) as { id?: unknown };
        if (typeof user?.id !== 'number' && typeof user?.id !== 'string') throw new AppError('upstream', 'GitHub gave no user id');
        const emails = (await getJson('/user/emails', accessToken)) as Array<{ email?: unknown; primary?: unknown; verified?: unknown }>;
        const list = Array.isArray(emails) ? emails.filter((e) => typeof e?.email === 'string') : [];
        const chosen = list.find((e) => e.primary && e.verified) ?? list.find((e) => e.verified) ?? list.find((e) => e.primary) ?? null;
        return { subject: String(user.id), email: (chosen?.email as string | undefined) ?? null, emailVerified: chosen?.verified === true };
      } catch (err) {
        refused(err);
      }
    },
  };
}

function openIdProvider(settings: { clientId: string; clientSecret: string; issuer: string }, redirectUri: string): Provider {
  const issuer = new URL(settings.issuer);
  // Discovered once and kept; a failed discovery is tried again at the next sign-in.
  let config: Promise<oidc.Configuration> | null = null;
  const configuration = () => {
    config ??= oidc
      .discovery(issuer, settings.clientId, settings.clientSecret, oidc.ClientSecretBasic(settings.clientSecret), {
        // http only for a provider on this machine (a development or test issuer).
        execute: issuer.protocol === 'http:' && isLoopback(issuer) ? [oidc.allowInsecureRequests] : [],
        timeout: 10,
      })
      .catch((err) => {
        config = null;
        throw err;
      });
    return config;
  };
  return {
    usesNonce: true,
    async authorizationUrl({ state, codeVerifier, nonce }) {
      const c = await configuration().catch(() => {
        throw new AppError('upstream', 'the sign-in provider cannot be reached; try again later');
      });
      return oidc.buildAuthorizationUrl(c, {
        redirect_uri: redirectUri,
        scope: 'openid email profile',
        response_type: 'code',
        state,
        nonce: nonce!,
        code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      });
    },
    async profile(callback, { state, codeVerifier, nonce }) {
      try {
        const c = await configuration();
        const tokens = await oidc.authorizationCodeGrant(c, callback, {
          pkceCodeVerifier: codeVerifier,
          expectedState: state,
          expectedNonce: nonce!,
          idTokenExpected: true,
        });
        const claims = tokens.claims();
        if (!claims) throw new AppError('invalid', 'the provider gave no id_token');
        const email = typeof claims.email === 'string' ? claims.email : null;
        return { subject: claims.sub, email, emailVerified: email !== null && claims.email_verified === true };
      } catch (err) {
        refused(err);
      }
    },
  };
}

/** Where a provider sends the browser back: what an operator registers at the provider. */
export const callbackUrl = (publicUrl: string, id: ProviderId) => `${publicUrl.replace(/\/+$/, '')}/api/auth/oauth/${id}/callback`;

/** The enabled providers by id, each with its callback at PUBLIC_URL. */
export function createProviders(settings: OAuthSettings, publicUrl: string): Partial<Record<ProviderId, Provider>> {
  const redirect = (id: ProviderId) => callbackUrl(publicUrl, id);
  const providers: Partial<Record<ProviderId, Provider>> = {};
  if (settings.github) providers.github = githubProvider(settings.github, redirect('github'));
  if (settings.google) providers.google = openIdProvider(settings.google, redirect('google'));
  if (settings.oidc) providers.oidc = openIdProvider(settings.oidc, redirect('oidc'));
  return providers;
}

/**
 * Local stand-ins for sign-in providers, on 127.0.0.1 port 0, speaking their real protocols:
 *
 *   startFakeGitHubOAuth: GitHub's web flow as documented (GET /login/oauth/authorize, POST
 *     /login/oauth/access_token checking client_id/secret, code, redirect_uri and the PKCE
 *     code_verifier; a bad code is 200 {error: "bad_verification_code"} like GitHub's) and its
 *     REST /user and /user/emails behind the bearer token. Serves as GITHUB_OAUTH_URL and GITHUB_API_URL.
 *   startFakeGoogle: a minimal OpenID provider like accounts.google.com: discovery, JWKS, an
 *     authorize endpoint that signs in whoever the test names, a token endpoint issuing an RS256
 *     id_token carrying the request's nonce (or, to test refusals, a tampered one).
 *   startOidcProvider: the real `oidc-provider` with its development interactions, and
 *   driveOidcLogin, which fills its login and consent forms the way a browser would.
 *
 * Each authorize endpoint signs in `signInAs(…)`'s user without a page (the user "is signed in at
 * the provider"), and redirects to the client's redirect_uri with code and state.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import Provider from 'oidc-provider';

const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');
const token = () => randomBytes(16).toString('hex');

/** client_id and client_secret from HTTP Basic (RFC 6749 form-encoded) or from the body, as providers accept both. */
function clientCredentials(request: Request, form: URLSearchParams) {
  const basic = /^Basic\s+(\S+)$/i.exec(request.headers.get('authorization') ?? '');
  if (basic) {
    const [id, secret] = Buffer.from(basic[1]!, 'base64').toString().split(':');
    return { id: decodeURIComponent(id ?? ''), secret: decodeURIComponent(secret ?? '') };
  }
  return { id: form.get('client_id'), secret: form.get('client_secret') };
}

interface PendingCode<U> {
  user: U;
  challenge: string | null;
  redirectUri: string;
  nonce?: string | null;
}

export interface FakeGitHubUser {
  id: number;
  login: string;
  emails: Array<{ email: string; primary: boolean; verified: boolean }>;
}

export function startFakeGitHubOAuth(client: { clientId: string; clientSecret: string }) {
  let current: FakeGitHubUser | null = null;
  const codes = new Map<string, PendingCode<FakeGitHubUser>>();
  const accessTokens = new Map<string, FakeGitHubUser>();
  const json = (body: unknown, status = 200) => Response.json(body, { status });
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const url = new URL(request.url);
      if (url.pathname === '/login/oauth/authorize') {
        const q = url.searchParams;
        if (q.get('client_id') !== client.clientId || !q.get('redirect_uri') || !current)
          return new Response('bad request', { status: 400 });
        const redirect = new URL(q.get('redirect_uri')!);
        const code = token();
        const method = q.get('code_challenge_method');
        codes.set(code, { user: current, challenge: method === 'S256' ? q.get('code_challenge') : null, redirectUri: redirect.toString() });
        redirect.searchParams.set('code', code);
        redirect.searchParams.set('state', q.get('state') ?? '');
        return Response.redirect(redirect.toString(), 302);
      }
      if (url.pathname === '/login/oauth/access_token' && request.method === 'POST') {
        const form = new URLSearchParams(await request.text());
        const { id, secret } = clientCredentials(request, form);
        if (id !== client.clientId || secret !== client.clientSecret)
          return json({
            error: 'incorrect_client_credentials',
            error_description: 'The client_id and/or client_secret passed are incorrect.',
          });
        const pending = codes.get(form.get('code') ?? '');
        codes.delete(form.get('code') ?? '');
        const redirectUri = form.get('redirect_uri');
        const verifier = form.get('code_verifier');
        const pkceOk = pending?.challenge ? verifier !== null && s256(verifier) === pending.challenge : true;
        if (!pending || (redirectUri && redirectUri !== pending.redirectUri) || !pkceOk)
          return json({ error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' });
        const access = `gho_${token()}`;
        accessTokens.set(access, pending.user);
        return json({ access_token: access, token_type: 'bearer', scope: 'read:user,user:email' });
      }
      const user = accessTokens.get(/^Bearer\s+(\S+)$/i.exec(request.headers.get('authorization') ?? '')?.[1] ?? '');
      if (url.pathname === '/user' || url.pathname === '/user/emails') {
        if (!user) return json({ message: 'Requires authentication' }, 401);
        if (url.pathname === '/user')
          return json({ id: user.id, login: user.login, email: user.emails.find((e) => e.primary)?.email ?? null });
        return json(user.emails.map((e) => ({ ...e, visibility: e.primary ? 'public' : null })));
      }
      return json({ message: 'Not Found' }, 404);
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    /** The user signed in at "GitHub" from now on. */
    signInAs(user: FakeGitHubUser) {
      current = user;
    },
    stop: () => server.stop(true),
  };
}

export interface FakeGoogleUser {
  sub: string;
  email?: string;
  email_verified?: boolean;
}

export async function startFakeGoogle(client: { clientId: string; clientSecret: string }) {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'fake-google-1', alg: 'RS256', use: 'sig' };
  let current: FakeGoogleUser | null = null;
  /** Set to make the next id_token carry this nonce instead of the request's. */
  let nonceOverride: string | null = null;
  const codes = new Map<string, PendingCode<FakeGoogleUser>>();
  let issuer = '';
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request): Promise<Response> {
      const url = new URL(request.url);
      if (url.pathname === '/.well-known/openid-configuration')
        return Response.json({
          issuer,
          authorization_endpoint: `${issuer}/o/oauth2/v2/auth`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/oauth2/v3/certs`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          code_challenge_methods_supported: ['plain', 'S256'],
          token_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic'],
          scopes_supported: ['openid', 'email', 'profile'],
        });
      if (url.pathname === '/oauth2/v3/certs') return Response.json({ keys: [jwk] });
      if (url.pathname === '/o/oauth2/v2/auth') {
        const q = url.searchParams;
        if (q.get('client_id') !== client.clientId || q.get('response_type') !== 'code' || !q.get('redirect_uri') || !current)
          return new Response('bad request', { status: 400 });
        const code = token();
        codes.set(code, { user: current, challenge: q.get('code_challenge'), redirectUri: q.get('redirect_uri')!, nonce: q.get('nonce') });
        const redirect = new URL(q.get('redirect_uri')!);
        redirect.searchParams.set('code', code);
        redirect.searchParams.set('state', q.get('state') ?? '');
        return Response.redirect(redirect.toString(), 302);
      }
      if (url.pathname === '/token' && request.method === 'POST') {
        const form = new URLSearchParams(await request.text());
        const { id, secret } = clientCredentials(request, form);
        if (id !== client.clientId || secret !== client.clientSecret) return Response.json({ error: 'invalid_client' }, { status: 401 });
        const pending = codes.get(form.get('code') ?? '');
        codes.delete(form.get('code') ?? '');
        const verifier = form.get('code_verifier');
        if (
          !pending ||
          form.get('grant_type') !== 'authorization_code' ||
          form.get('redirect_uri') !== pending.redirectUri ||
          !verifier ||
          s256(verifier) !== pending.challenge
        )
          return Response.json({ error: 'invalid_grant' }, { status: 400 });
        const nonce = nonceOverride ?? pending.nonce;
        nonceOverride = null;
        const idToken = await new SignJWT({ ...pending.user, ...(nonce ? { nonce } : {}) })
          .setProtectedHeader({ alg: 'RS256', kid: jwk.kid })
          .setIssuer(issuer)
          .setAudience(client.clientId)
          .setIssuedAt()
          .setExpirationTime('1h')
          .sign(privateKey);
        return Response.json({
          access_token: `ya29.${token()}`,
          token_type: 'Bearer',
          expires_in: 3599,
          scope: 'openid email profile',
          id_token: idToken,
        });
      }
      return new Response('not found', { status: 404 });
    },
  });
  issuer = `http://127.0.0.1:${server.port}`;
  return {
    url: issuer,
    signInAs(user: FakeGoogleUser) {
      current = user;
    },
    /** The next id_token carries this nonce (a token meant for another sign-in). */
    tamperNextNonce(nonce: string) {
      nonceOverride = nonce;
    },
    stop: () => server.stop(true),
  };
}

export interface OidcAccount {
  email?: string;
  email_verified?: boolean;
}

/** The real oidc-provider with one confidential client (PKCE required) and the accounts a test adds. */
export async function startOidcProvider(client: { clientId: string; clientSecret: string; redirectUri: string }) {
  const accounts = new Map<string, OidcAccount>();
  let handler: ReturnType<Provider['callback']> | null = null;
  const server: Server = createServer((req, res) => handler!(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: client.clientId,
        client_secret: client.clientSecret,
        redirect_uris: [client.redirectUri],
        response_types: ['code'],
        grant_types: ['authorization_code'],
      },
    ],
    pkce: { required: () => true },
    cookies: { keys: ['oidc-provider-test-cookie-key'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    // The email claims in the id_token itself, where a sign-in reads them.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    async findAccount(_ctx: unknown, id: string) {
      const account = accounts.get(id);
      if (!account) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...account }) };
    },
  });
  handler = provider.callback();
  return {
    url: issuer,
    addAccount(id: string, account: OidcAccount) {
      accounts.set(id, account);
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Follows the provider's redirects from an authorization URL as a browser would (its own cookie
 * jar), signs in as `accountId` and consents on the development interaction pages, and returns
 * the URL it redirects to at `redirectPrefix` (the client's callback, with code and state).
 */
export async function driveOidcLogin(authorizationUrl: string, accountId: string, redirectPrefix: string): Promise<string> {
  const jar = new Map<string, string>();
  const cookieHeader = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const remember = (res: Response) => {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const i = pair!.indexOf('=');
      jar.set(pair!.slice(0, i).trim(), pair!.slice(i + 1));
    }
  };
  let url = authorizationUrl;
  let init: RequestInit = {};
  for (let hop = 0; hop < 20; hop++) {
    if (url.startsWith(redirectPrefix)) return url;
    const res = await fetch(url, {
      ...init,
      redirect: 'manual',
      headers: { ...(init.headers as Record<string, string>), cookie: cookieHeader() },
    });
    remember(res);
    init = {};
    const location = res.headers.get('location');
    if (location) {
      await res.body?.cancel();
      url = new URL(location, url).toString();
      continue;
    }
    const html = await res.text();
    if (res.status !== 200 || !/\/interaction\/[^/]+$/.test(new URL(url).pathname))
      throw new Error(`oidc-provider answered ${res.status} at ${url}: ${html.slice(0, 300)}`);
    const form: Record<string, string> = html.includes('name="login"')
      ? { prompt: 'login', login: accountId, password: 'any' }
      : { prompt: 'consent' };
    init = { method: 'POST', body: new URLSearchParams(form).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } };
  }
  throw new Error('too many redirects at the OpenID provider');
}

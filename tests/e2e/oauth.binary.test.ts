/**
 * Sign-in with GitHub (a local fake speaking its OAuth web flow and REST API) and with a generic
 * OpenID provider (the real oidc-provider) against dist/cpd as a process, the way a browser does
 * it: the start's redirect, the provider, the callback with the browser cookie, the console.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { type RunningBinary, startBinary } from '../support/binary';
import { createEmptyPostgresDatabase } from '../support/db';
import { driveOidcLogin, startFakeGitHubOAuth, startOidcProvider } from '../support/fake-oauth';
import { freePort } from '../support/ports';

const GH = { clientId: 'binary-gh-client', clientSecret: 'binary-gh-secret' };

describe('OAuth sign-in, against the binary', () => {
  let cpd: RunningBinary;
  let db: Awaited<ReturnType<typeof createEmptyPostgresDatabase>>;
  let github: ReturnType<typeof startFakeGitHubOAuth>;
  let op: Awaited<ReturnType<typeof startOidcProvider>>;
  let origin: string;

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    github = startFakeGitHubOAuth(GH);
    op = await startOidcProvider({
      clientId: 'binary-oidc',
      clientSecret: 'binary-oidc-secret-0123456789',
      redirectUri: `${origin}/api/auth/oauth/oidc/callback`,
    });
    db = await createEmptyPostgresDatabase();
    cpd = await startBinary({
      env: {
        PORT: String(port),
        PUBLIC_URL: origin,
        DATABASE_URL: db.url,
        SECRET_KEY: 'oauth-binary-secret-0123456789abcdef0123',
        GITHUB_CLIENT_ID: GH.clientId,
        GITHUB_CLIENT_SECRET: GH.clientSecret,
        GITHUB_OAUTH_URL: github.url,
        GITHUB_API_URL: github.url,
        OIDC_ISSUER: op.url,
        OIDC_CLIENT_ID: 'binary-oidc',
        OIDC_CLIENT_SECRET: 'binary-oidc-secret-0123456789',
        OIDC_NAME: 'Company SSO',
      },
    });
  }, 180_000);
  afterAll(async () => {
    if (cpd) await cpd.stop();
    github?.stop();
    await op?.stop();
    await db?.drop();
  });

  /** A browser's cookie jar for cpd's origin. */
  function browser() {
    const jar = new Map<string, string>();
    return {
      jar,
      async get(url: string, headers: Record<string, string> = {}) {
        const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
        const res = await fetch(url, { redirect: 'manual', headers: { ...(cookie ? { cookie } : {}), ...headers } });
        for (const line of res.headers.getSetCookie()) {
          const [pair] = line.split(';');
          const i = pair!.indexOf('=');
          jar.set(pair!.slice(0, i), pair!.slice(i + 1));
        }
        return res;
      },
    };
  }

  test('/api/site lists both providers', async () => {
    const site = (await (await fetch(`${origin}/api/site`)).json()) as { features: { oauth: string[]; oidc_name: string } };
    expect(site.features.oauth).toEqual(['github', 'oidc']);
    expect(site.features.oidc_name).toBe('Company SSO');
  });

  test('GitHub: start, sign in at the provider, back to /console signed in; the replayed callback is refused', async () => {
    github.signInAs({ id: 4242, login: 'binary', emails: [{ email: 'binary@gh.example', primary: true, verified: true }] });
    const b = browser();
    const start = await b.get(`${origin}/api/auth/oauth/github`);
    expect(start.status).toBe(302);
    const atProvider = await fetch(start.headers.get('location')!, { redirect: 'manual' });
    const back = atProvider.headers.get('location')!;
    expect(back).toStartWith(`${origin}/api/auth/oauth/github/callback?`);
    const done = await b.get(back);
    expect(done.status).toBe(302);
    expect(done.headers.get('location')).toBe('/console');
    const me = await fetch(`${origin}/api/auth/me`, { headers: { authorization: `Bearer ${b.jar.get('cpd_session')}` } });
    expect(await me.json()).toMatchObject({ email: 'binary@gh.example', has_password: false });

    const replay = await b.get(back, { accept: 'application/json' });
    expect(replay.status).toBe(400);
    expect(await replay.json()).toEqual({ error: expect.any(String) });
  });

  test('generic OpenID: a full sign-in through oidc-provider answers {token, user} as JSON', async () => {
    op.addAccount('binary-sub-1', { email: 'sso@op.example', email_verified: true });
    const b = browser();
    const start = await b.get(`${origin}/api/auth/oauth/oidc`);
    const back = await driveOidcLogin(start.headers.get('location')!, 'binary-sub-1', `${origin}/`);
    const done = await b.get(back, { accept: 'application/json' });
    expect(done.status).toBe(200);
    const body = (await done.json()) as { token: string; user: { email: string } };
    expect(body.user.email).toBe('sso@op.example');
    const identities = await fetch(`${origin}/api/auth/identities`, { headers: { authorization: `Bearer ${body.token}` } });
    expect(((await identities.json()) as Array<{ provider: string }>).map((i) => i.provider)).toEqual(['oidc']);
  });
});

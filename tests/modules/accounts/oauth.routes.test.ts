/**
 * Sign-in with GitHub, Google and a generic OpenID provider, against local servers that speak
 * their protocols (tests/support/fake-oauth.ts; the generic one is the real oidc-provider): the
 * account found, linked or made; every refused callback (replayed, forged, another browser, a
 * token for another sign-in); linking and unlinking with the last-way rule; closed registration.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { NobleCryptoPlugin, ScureBase32Plugin, TOTP } from 'otplib';
import { createTestApp, type TestApp } from '../../support/app';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { driveOidcLogin, type FakeGitHubUser, startFakeGitHubOAuth, startFakeGoogle, startOidcProvider } from '../../support/fake-oauth';
import { makeUser } from '../../support/make';
import { freePort } from '../../support/ports';

const PUBLIC = 'http://localhost:8080';
const GH = { clientId: 'gh-client-id', clientSecret: 'gh-client-secret' };
const GOOGLE = { clientId: 'google-client.apps.googleusercontent.com', clientSecret: 'google-secret' };
const OIDC = {
  clientId: 'cpd-oidc-client',
  clientSecret: 'oidc-client-secret-0123456789',
  redirectUri: `${PUBLIC}/api/auth/oauth/oidc/callback`,
};

/** A browser on the app: keeps its cookies, follows nothing by itself. */
function browser(t: TestApp) {
  const jar = new Map<string, string>();
  return {
    jar,
    async get(pathOrUrl: string, headers: Record<string, string> = {}) {
      const url = new URL(pathOrUrl, PUBLIC);
      const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const res = await t.app.handle(
        new Request(`http://localhost${url.pathname}${url.search}`, { headers: { ...(cookie ? { cookie } : {}), ...headers } }),
      );
      for (const line of res.headers.getSetCookie()) {
        const [pair] = line.split(';');
        const i = pair!.indexOf('=');
        const value = pair!.slice(i + 1);
        if (value === '' || /max-age=0/i.test(line)) jar.delete(pair!.slice(0, i));
        else jar.set(pair!.slice(0, i), value);
      }
      const text = await res.text();
      return {
        status: res.status,
        location: res.headers.get('location'),
        text,
        body: text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : null,
      };
    },
  };
}

/** The provider's redirect back to us, as the browser would follow it from the authorization URL. */
async function atProvider(authorizationUrl: string): Promise<string> {
  const res = await fetch(authorizationUrl, { redirect: 'manual' });
  expect(res.status).toBe(302);
  return res.headers.get('location')!;
}

const ghUser = (id: number, email: string, verified = true): FakeGitHubUser => ({
  id,
  login: `user${id}`,
  emails: [{ email, primary: true, verified }],
});

describe('sign-in with providers', () => {
  let t: TestApp;
  let closed: TestApp;
  let limited: TestApp;
  let db: TestDatabase;
  let github: ReturnType<typeof startFakeGitHubOAuth>;
  let google: Awaited<ReturnType<typeof startFakeGoogle>>;
  let op: Awaited<ReturnType<typeof startOidcProvider>>;

  beforeAll(async () => {
    github = startFakeGitHubOAuth(GH);
    google = await startFakeGoogle(GOOGLE);
    op = await startOidcProvider(OIDC);
    const env = {
      PUBLIC_URL: PUBLIC,
      GITHUB_CLIENT_ID: GH.clientId,
      GITHUB_CLIENT_SECRET: GH.clientSecret,
      GITHUB_OAUTH_URL: github.url,
      GITHUB_API_URL: github.url,
      GOOGLE_CLIENT_ID: GOOGLE.clientId,
      GOOGLE_CLIENT_SECRET: GOOGLE.clientSecret,
      GOOGLE_ISSUER: google.url,
      OIDC_ISSUER: op.url,
      OIDC_CLIENT_ID: OIDC.clientId,
      OIDC_CLIENT_SECRET: OIDC.clientSecret,
      OIDC_NAME: 'Company SSO',
      RATE_LIMITS: 'oauth_start=1000/1m',
    };
    db = await createTestDatabase('postgres');
    t = await createTestApp('postgres', env, { testDb: db });
    closed = await createTestApp('postgres', { ...env, REGISTRATION: 'closed' }, { testDb: db });
    limited = await createTestApp('postgres', { ...env, RATE_LIMITS: 'oauth_start=3/1h', TRUST_PROXY: 'true' }, { testDb: db });
  });
  afterAll(async () => {
    await t.close();
    await closed.close();
    await limited.close();
    await db.drop();
    github.stop();
    google.stop();
    await op.stop();
  });

  /** Start at the app, pass the provider, come back: the callback's answer. */
  async function signIn(app: TestApp, provider: 'github' | 'google', headers: Record<string, string> = {}) {
    const b = browser(app);
    const start = await b.get(`/api/auth/oauth/${provider}`);
    expect(start.status).toBe(302);
    const back = await atProvider(start.location!);
    return { b, back, res: await b.get(back, headers) };
  }

  const userRow = async (id: string) =>
    (
      await t.ctx.database.query<{ email: string | null; password_hash: string | null; email_verified_at: string | null }>(
        sql`select email, password_hash, email_verified_at from users where id = ${id}`,
      )
    )[0]!;

  test('the start: 302 to GitHub with state and an S256 PKCE challenge, the state stored hashed and bound to an httpOnly cookie', async () => {
    const b = browser(t);
    const start = await b.get('/api/auth/oauth/github');
    const url = new URL(start.location!);
    expect(`${url.origin}${url.pathname}`).toBe(`${github.url}/login/oauth/authorize`);
    expect(url.searchParams.get('client_id')).toBe(GH.clientId);
    expect(url.searchParams.get('redirect_uri')).toBe(`${PUBLIC}/api/auth/oauth/github/callback`);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    const state = url.searchParams.get('state')!;
    expect(state.length).toBeGreaterThanOrEqual(43);
    const rows = await t.ctx.database.query<{ state_hash: string }>(
      sql`select state_hash from oauth_states where state_hash = encode(sha256(${state}::bytea), 'hex')`,
    );
    expect(rows).toHaveLength(1);
    expect(b.jar.get('cpd_oauth')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  test('GitHub: a first sign-in makes an account without a password, its verified email verified; the next finds it', async () => {
    github.signInAs(ghUser(1001, 'octo@gh.example'));
    const { b, res } = await signIn(t, 'github');
    expect(res.status).toBe(302);
    expect(res.location).toBe('/console');
    const session = b.jar.get('cpd_session')!;
    const me = await t.request('GET', '/api/auth/me', { token: session });
    expect(me.body).toMatchObject({ email: 'octo@gh.example', has_password: false });
    const row = await userRow(me.body.id);
    expect(row.password_hash).toBeNull();
    expect(row.email_verified_at).not.toBeNull();
    const identities = await t.request('GET', '/api/auth/identities', { token: session });
    expect(identities.body).toEqual([
      { id: expect.any(String), provider: 'github', email: 'octo@gh.example', created_at: expect.any(String) },
    ]);

    // The same GitHub user, whatever its email says now: the same account.
    github.signInAs(ghUser(1001, 'renamed@gh.example'));
    const again = await signIn(t, 'github');
    const me2 = await t.request('GET', '/api/auth/me', { token: again.b.jar.get('cpd_session')! });
    expect(me2.body.id).toBe(me.body.id);
  });

  test('a provider that gives no email makes an account without one (the provider is its way in)', async () => {
    github.signInAs({ id: 1010, login: 'private', emails: [] });
    const { res } = await signIn(t, 'github', { accept: 'application/json' });
    expect(res.status).toBe(200);
    expect(res.body.user).toEqual({ id: expect.stringMatching(/^usr_/), email: null });
    const row = await userRow(res.body.user.id);
    expect(row).toEqual({ email: null, password_hash: null, email_verified_at: null });
  });

  test('Accept: application/json answers {token, user} and sets the cookie', async () => {
    github.signInAs(ghUser(1002, 'json@gh.example'));
    const { b, res } = await signIn(t, 'github', { accept: 'application/json' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), user: { id: expect.stringMatching(/^usr_/), email: 'json@gh.example' } });
    expect(b.jar.get('cpd_session')).toBe(res.body.token);
  });

  test('a verified email matches an existing account, which gets the identity linked and its email verified', async () => {
    const owner = await makeUser(t, { email: 'Owner@Match.example' });
    github.signInAs(ghUser(1003, 'owner@match.example'));
    const { res } = await signIn(t, 'github', { accept: 'application/json' });
    expect(res.body.user.id).toBe(owner.id);
    expect((await userRow(owner.id)).email_verified_at).not.toBeNull();
    expect(
      (await t.request('GET', '/api/auth/identities', { token: owner.token })).body.map((i: { provider: string }) => i.provider),
    ).toEqual(['github']);
  });

  test('an unverified email never matches: refused when an account holds it, else a new account whose email stays unverified', async () => {
    const owner = await makeUser(t, { email: 'victim@unverified.example' });
    github.signInAs(ghUser(1004, 'victim@unverified.example', false));
    const json = await signIn(t, 'github', { accept: 'application/json' });
    expect(json.res.status).toBe(409);
    expect(json.res.body).toEqual({ error: expect.stringContaining('link') });
    const page = await signIn(t, 'github');
    expect(page.res.status).toBe(302);
    expect(page.res.location).toStartWith('/login?oauth_error=');
    expect(page.b.jar.has('cpd_session')).toBe(false);
    expect((await t.request('GET', '/api/auth/identities', { token: owner.token })).body).toEqual([]);

    github.signInAs(ghUser(1005, 'fresh@unverified.example', false));
    const fresh = await signIn(t, 'github', { accept: 'application/json' });
    expect(fresh.res.status).toBe(200);
    expect((await userRow(fresh.res.body.user.id)).email_verified_at).toBeNull();
  });

  test('a replayed callback, a forged state and a callback in another browser are refused (400), and none signs in', async () => {
    github.signInAs(ghUser(1006, 'replay@gh.example'));
    const first = await signIn(t, 'github', { accept: 'application/json' });
    expect(first.res.status).toBe(200);
    const replay = await first.b.get(first.back, { accept: 'application/json' });
    expect(replay.status).toBe(400);
    expect(replay.body).toEqual({ error: expect.any(String) });

    const b = browser(t);
    await b.get('/api/auth/oauth/github');
    const forged = await b.get(`/api/auth/oauth/github/callback?code=whatever&state=${'A'.repeat(43)}`, { accept: 'application/json' });
    expect(forged.status).toBe(400);

    // An attacker starts a sign-in and sends the victim the callback: the victim's browser lacks the cookie.
    const attacker = browser(t);
    const start = await attacker.get('/api/auth/oauth/github');
    const back = await atProvider(start.location!);
    const victim = browser(t);
    await victim.get('/api/auth/oauth/github'); // the victim has a cookie of its own
    const crossed = await victim.get(back, { accept: 'application/json' });
    expect(crossed.status).toBe(400);
    expect(crossed.body.error).toContain('another browser');
    expect(victim.jar.has('cpd_session')).toBe(false);
    // …and the state is spent, so the attacker cannot use it either.
    expect((await attacker.get(back, { accept: 'application/json' })).status).toBe(400);
  });

  test('the provider refusing (error=access_denied), an unknown or disabled provider: 4xx, never 500', async () => {
    const b = browser(t);
    const start = await b.get('/api/auth/oauth/github');
    const state = new URL(start.location!).searchParams.get('state')!;
    const denied = await b.get(`/api/auth/oauth/github/callback?error=access_denied&state=${state}`, { accept: 'application/json' });
    expect(denied.status).toBe(400);
    expect(denied.body.error).toContain('access_denied');
    expect((await b.get('/api/auth/oauth/myspace')).status).toBe(404);
    expect((await b.get('/api/auth/oauth/myspace/callback?state=x&code=y')).status).toBe(302);
    expect((await b.get('/api/auth/oauth/myspace/callback?state=x&code=y', { accept: 'application/json' })).status).toBe(404);
    expect((await b.get('/api/auth/oauth/github/callback', { accept: 'application/json' })).status).toBe(400);
    // A malformed browser cookie is no binding: refused like a missing one.
    const fresh = browser(t);
    const begun = await fresh.get('/api/auth/oauth/github');
    const back = await atProvider(begun.location!);
    const mangled = await fresh.get(back, { accept: 'application/json', cookie: 'cpd_oauth=%E0%A4%A' });
    expect(mangled.status).toBe(400);
  });

  test('a disabled account cannot sign in with its provider', async () => {
    github.signInAs(ghUser(1007, 'disabled@gh.example'));
    const first = await signIn(t, 'github', { accept: 'application/json' });
    await t.ctx.database.query(sql`update users set disabled = true where id = ${first.res.body.user.id}`);
    const again = await signIn(t, 'github', { accept: 'application/json' });
    expect(again.res.status).toBe(403);
    expect(again.b.jar.has('cpd_session')).toBe(false);
  });

  test('registration closed: no new account by a provider (403), an existing one still signs in', async () => {
    github.signInAs(ghUser(1008, 'before-closing@gh.example'));
    const existing = await signIn(t, 'github', { accept: 'application/json' });
    expect(existing.res.status).toBe(200);
    const again = await signIn(closed, 'github', { accept: 'application/json' });
    expect(again.res.status).toBe(200);
    expect(again.res.body.user.id).toBe(existing.res.body.user.id);
    github.signInAs(ghUser(1009, 'newcomer@gh.example'));
    const refused = await signIn(closed, 'github', { accept: 'application/json' });
    expect(refused.res.status).toBe(403);
    expect(refused.res.body).toEqual({ error: 'registration is closed on this site' });
  });

  test('Google: the id_token is checked and its verified email used; a token with another nonce is refused', async () => {
    google.signInAs({ sub: 'g-2001', email: 'someone@gmail.example', email_verified: true });
    const start = await browser(t).get('/api/auth/oauth/google');
    const url = new URL(start.location!);
    expect(url.searchParams.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url.searchParams.get('scope')).toContain('openid');
    const ok = await signIn(t, 'google', { accept: 'application/json' });
    expect(ok.res.status).toBe(200);
    expect(ok.res.body.user.email).toBe('someone@gmail.example');
    expect((await userRow(ok.res.body.user.id)).email_verified_at).not.toBeNull();

    google.signInAs({ sub: 'g-2002', email: 'nonce@gmail.example', email_verified: true });
    google.tamperNextNonce('a-nonce-of-another-sign-in');
    const tampered = await signIn(t, 'google', { accept: 'application/json' });
    expect(tampered.res.status).toBe(400);
    expect(tampered.res.body.error).toContain('nonce');
    expect(tampered.b.jar.has('cpd_session')).toBe(false);
  });

  test('generic OpenID (oidc-provider): link to a password account, list, unlink; the last way cannot go until a password is set', async () => {
    op.addAccount('op-3001', { email: 'linker@op.example', email_verified: true });
    const owner = await makeUser(t, { email: 'someone-else@pw.example' });
    const b = browser(t);
    b.jar.set('cpd_session', owner.token);
    const linkStart = await t.request('POST', '/api/auth/oauth/oidc/link', { token: owner.token });
    expect(linkStart.status).toBe(200);
    // The link's browser cookie came with that answer.
    const browserCookie = /cpd_oauth=([^;]+)/.exec(linkStart.headers.get('set-cookie') ?? '')![1]!;
    b.jar.set('cpd_oauth', browserCookie);
    const back = await driveOidcLogin(linkStart.body.url, 'op-3001', `${PUBLIC}/`);
    const linked = await b.get(back);
    expect(linked.status).toBe(302);
    expect(linked.location).toBe('/console/account?linked=oidc');
    const list = (await t.request('GET', '/api/auth/identities', { token: owner.token })).body;
    expect(list).toEqual([{ id: expect.any(String), provider: 'oidc', email: 'linker@op.example', created_at: expect.any(String) }]);

    // Now the OpenID account signs in to the same account.
    const signInB = browser(t);
    const start = await signInB.get('/api/auth/oauth/oidc');
    const cb = await signInB.get(await driveOidcLogin(start.location!, 'op-3001', `${PUBLIC}/`), { accept: 'application/json' });
    expect(cb.status).toBe(200);
    expect(cb.body.user.id).toBe(owner.id);

    expect((await t.request('DELETE', `/api/auth/identities/${list[0].id}`, { token: owner.token })).status).toBe(204);
    expect((await t.request('GET', '/api/auth/identities', { token: owner.token })).body).toEqual([]);
    expect((await t.request('DELETE', `/api/auth/identities/${list[0].id}`, { token: owner.token })).status).toBe(404);
  });

  test('the last way to sign in: an account made by a provider keeps its only identity (409) until it sets a password', async () => {
    op.addAccount('op-3002', { email: 'only-way@op.example', email_verified: true });
    const b = browser(t);
    const start = await b.get('/api/auth/oauth/oidc');
    const made = await b.get(await driveOidcLogin(start.location!, 'op-3002', `${PUBLIC}/`), { accept: 'application/json' });
    expect(made.status).toBe(200);
    const token = made.body.token;
    const [identity] = (await t.request('GET', '/api/auth/identities', { token })).body;
    const refused = await t.request('DELETE', `/api/auth/identities/${identity.id}`, { token });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error: expect.stringContaining('last way') });

    // No current password to give: the account has none.
    expect((await t.request('POST', '/api/auth/password', { token, body: { new_password: 'a-first-password' } })).status).toBe(204);
    expect((await t.request('GET', '/api/auth/me', { token })).body.has_password).toBe(true);
    expect((await t.request('DELETE', `/api/auth/identities/${identity.id}`, { token })).status).toBe(204);
    expect(
      (await t.request('POST', '/api/auth/login', { body: { identifier: 'only-way@op.example', password: 'a-first-password' } })).status,
    ).toBe(200);
    // With a password now, changing it needs the current one again.
    expect((await t.request('POST', '/api/auth/password', { token, body: { new_password: 'a-second-password' } })).status).toBe(403);
  });

  test('a phone counts as a way to sign in while SMS codes are on', async () => {
    github.signInAs(ghUser(1010, 'phone-way@gh.example'));
    const made = await signIn(t, 'github', { accept: 'application/json' });
    const token = made.res.body.token;
    const [identity] = (await t.request('GET', '/api/auth/identities', { token })).body;
    expect(t.ctx.config.accounts.sms).not.toBeNull(); // loopback PUBLIC_URL: SMS codes to the log
    await t.ctx.database.query(sql`update users set phone = '+15550100001' where id = ${made.res.body.user.id}`);
    expect((await t.request('DELETE', `/api/auth/identities/${identity.id}`, { token })).status).toBe(204);
  });

  test('an account with 2FA gets the 2FA step after a provider sign-in, as after a password', async () => {
    github.signInAs(ghUser(1012, 'twofa@gh.example'));
    const token = (await signIn(t, 'github', { accept: 'application/json' })).res.body.token;
    const setup = await t.request('POST', '/api/auth/2fa/setup', { token });
    const totp = new TOTP({ crypto: new NobleCryptoPlugin(), base32: new ScureBase32Plugin() });
    const enable = await t.request('POST', '/api/auth/2fa/enable', {
      token,
      body: { code: await totp.generate({ secret: setup.body.secret }) },
    });
    expect(enable.status).toBe(200);

    const json = await signIn(t, 'github', { accept: 'application/json' });
    expect(json.res.body).toEqual({ two_factor_required: true, challenge_token: expect.any(String), expires_at: expect.any(String) });
    expect(json.b.jar.has('cpd_session')).toBe(false);
    const page = await signIn(t, 'github');
    expect(page.res.location).toMatch(/^\/login#two_factor=[A-Za-z0-9_-]{43}$/);
    expect(page.b.jar.has('cpd_session')).toBe(false);
    const challenge = page.res.location!.slice('/login#two_factor='.length);
    const verified = await t.request('POST', '/api/auth/2fa/verify', {
      body: { challenge_token: challenge, code: enable.body.recovery_codes[0] },
    });
    expect(verified.status).toBe(200);
    expect(verified.body.user.email).toBe('twofa@gh.example');
  });

  test('a password login to an account without a password is the usual 401', async () => {
    github.signInAs(ghUser(1011, 'no-password@gh.example'));
    await signIn(t, 'github', { accept: 'application/json' });
    const res = await t.request('POST', '/api/auth/login', { body: { identifier: 'no-password@gh.example', password: 'anything-at-all' } });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: 'invalid identifier or password' });
  });

  test('starts are rate limited per client address (429 with Retry-After), and a limited start stores nothing', async () => {
    const start = (address: string) => limited.request('GET', '/api/auth/oauth/github', { headers: { 'x-forwarded-for': address } });
    const before = await limited.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from oauth_states`);
    expect([(await start('10.9.0.1')).status, (await start('10.9.0.1')).status, (await start('10.9.0.1')).status]).toEqual([302, 302, 302]);
    const refused = await start('10.9.0.1');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    const after = await limited.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from oauth_states`);
    expect(after[0]!.n - before[0]!.n).toBe(3);
    expect((await start('10.9.0.2')).status).toBe(302);
  });

  test('a provider that does not answer: 502 {error}, at the start (OpenID discovery) or at the callback (GitHub token exchange)', async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const down = await createTestApp(
      'postgres',
      {
        PUBLIC_URL: PUBLIC,
        GITHUB_CLIENT_ID: 'x',
        GITHUB_CLIENT_SECRET: 'y',
        GITHUB_OAUTH_URL: nowhere,
        GITHUB_API_URL: nowhere,
        OIDC_ISSUER: nowhere,
        OIDC_CLIENT_ID: 'x',
        OIDC_CLIENT_SECRET: 'y',
      },
      { testDb: db },
    );
    try {
      const b = browser(down);
      const oidc = await b.get('/api/auth/oauth/oidc');
      expect(oidc.status).toBe(502);
      expect(oidc.body).toEqual({ error: expect.any(String) });
      const start = await b.get('/api/auth/oauth/github');
      const state = new URL(start.location!).searchParams.get('state')!;
      const back = await b.get(`/api/auth/oauth/github/callback?code=c&state=${state}`, { accept: 'application/json' });
      expect(back.status).toBe(502);
      expect(back.body).toEqual({ error: 'the sign-in provider cannot be reached; try again later' });
    } finally {
      await down.close();
    }
  });

  test('identities need a session; linking needs one too', async () => {
    expect((await t.request('GET', '/api/auth/identities')).status).toBe(401);
    expect((await t.request('DELETE', '/api/auth/identities/idn_x')).status).toBe(401);
    expect((await t.request('POST', '/api/auth/oauth/github/link')).status).toBe(401);
  });
});

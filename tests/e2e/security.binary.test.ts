/**
 * The attacks of the "safe by default" report, run against dist/cpd as a process, as an attacker
 * or a careless operator would: free money from a public sandbox, free inference and shared
 * anonymous sessions, cross-site writes, locking an account out, two sites on one database, and
 * a world-readable embedded database.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from '../support/binary';
import { createEmptyPostgresDatabase } from '../support/db';
import { freePort } from '../support/ports';

const SECRET = 'security-test-secret-0123456789abcdef0123';

/** Runs `cpd serve` expecting it to refuse to start: exit code and stderr. */
async function refusedStart(env: Record<string, string>, cwd: string) {
  const proc = Bun.spawn([await ensureBuilt(), 'serve'], { cwd, env: { ...baseEnv(), ...env }, stdout: 'pipe', stderr: 'pipe' });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  return { code, stderr };
}

/** Every path under `dir` whose mode lets another account read, write or enter it. */
function openToOthers(dir: string): string[] {
  const open: string[] = [];
  const walk = (path: string) => {
    const info = statSync(path);
    if ((info.mode & 0o077) !== 0) open.push(`${path} ${(info.mode & 0o777).toString(8)}`);
    if (info.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(dir);
  return open;
}

describe('the attacks of the report, against the binary', () => {
  const work = mkdtempSync(join(tmpdir(), 'cpd-security-'));
  const dataDir = join(work, 'data');
  let cpd: RunningBinary;
  let base: string;
  let origin: string;
  const umask = process.umask();

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    // A permissive umask, as outside systemd: cpd must not depend on it.
    process.umask(0o022);
    cpd = await startBinary({
      cwd: work,
      env: {
        PORT: String(port),
        PUBLIC_URL: origin,
        DATA_DIR: dataDir,
        SECRET_KEY: SECRET,
        TRUST_PROXY: 'true',
        RATE_LIMITS: 'agents_anonymous=4/1h,login=5/1h,login_address=8/1h',
      },
    });
    process.umask(umask);
    base = cpd.url;
  }, 120_000);
  afterAll(async () => {
    process.umask(umask);
    if (cpd) await cpd.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const call = (method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) =>
    fetch(`${base}${path}`, { method, headers: init.headers, body: init.body, redirect: 'manual' });
  const json = (body: unknown) => ({ body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  async function register(email: string) {
    const res = await call('POST', '/api/auth/register', json({ email, password: 'correct horse battery' }));
    expect(res.status).toBe(201);
    return ((await res.json()) as { token: string }).token;
  }

  test('1. a public site cannot default to free money; providers belong to their site', async () => {
    const cwd = mkdtempSync(join(work, 'refused-'));
    const publicSandbox = await refusedStart({ PUBLIC_URL: 'https://cpd.example.com' }, cwd);
    expect(publicSandbox.code).toBe(2);
    expect(publicSandbox.stderr.trim().split('\n')).toEqual([expect.stringContaining('PAYMENT_MODE')]);
    const wrongProvider = await refusedStart({ SITE: 'intl', PAYMENT_PROVIDERS: 'card,app_wallet' }, cwd);
    expect(wrongProvider.code).toBe(2);
    expect(wrongProvider.stderr.trim().split('\n')).toEqual([expect.stringContaining('PAYMENT_PROVIDERS: app_wallet is a provider of the cn site')]);
    // The loopback site under test says what a visitor gets for free.
    const site = (await (await call('GET', '/api/site')).json()) as { features: Record<string, boolean> };
    expect(site.features).toMatchObject({ sandbox_payments: true, open_agents: true });
  });

  test('2. anonymous agent callers: one workspace per address, rate limited per address', async () => {
    const from = (address: string) => ({ 'x-forwarded-for': address, 'content-type': 'application/json' });
    const created = await call('POST', '/v1/agents', { body: JSON.stringify({ model: 'm' }), headers: from('203.0.113.7') });
    expect(created.status).toBe(201);
    const agent = (await created.json()) as { id: string };
    expect((await call('GET', `/v1/agents/${agent.id}`, { headers: from('203.0.113.8') })).status).toBe(404);
    const listed = (await (await call('GET', '/v1/agents', { headers: from('203.0.113.8') })).json()) as { data: unknown[] };
    expect(listed.data).toEqual([]);
    for (let i = 0; i < 2; i++) expect((await call('GET', '/v1/agents', { headers: from('203.0.113.8') })).status).toBe(200);
    const limited = await call('GET', '/v1/agents', { headers: from('203.0.113.8') });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await call('GET', `/v1/agents/${agent.id}`, { headers: from('203.0.113.7') })).status).toBe(200);
  });

  test('3. cross-site writes: a foreign page cannot create a key; this origin and bearer clients can; the sandbox Pay button works', async () => {
    const token = await register('csrf-victim@example.com');
    const cookie = `cpd_session=${token}`;
    const form = 'application/x-www-form-urlencoded';
    const keys = async () => ((await (await call('GET', '/api/api-keys', { headers: { authorization: `Bearer ${token}` } })).json()) as unknown[]).length;
    // The report's attack: a form on another site posting with the victim's cookie.
    expect((await call('POST', '/api/api-keys', { body: 'name=pwned', headers: { cookie, 'content-type': form, origin: 'https://evil.example' } })).status).toBe(403);
    expect((await call('POST', '/api/api-keys', { body: 'name=pwned', headers: { cookie, 'content-type': form, 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    expect((await call('POST', '/api/api-keys', { body: '{"name":"pwned"}', headers: { cookie, 'content-type': 'application/json' } })).status).toBe(403);
    expect((await call('POST', '/api/api-keys', { body: 'name=pwned', headers: { authorization: `Bearer ${token}`, 'content-type': form } })).status).toBe(415);
    expect(await keys()).toBe(0);
    // A sibling site's forged login (it would sign the victim into the attacker's account).
    const forgedLogin = await call('POST', '/api/auth/login', { body: JSON.stringify({ identifier: 'csrf-victim@example.com', password: 'correct horse battery' }), headers: { 'content-type': 'application/json', origin: 'https://cn.example.com' } });
    expect(forgedLogin.status).toBe(403);
    // This site's own console (fetch with the cookie sends Origin) and bearer clients.
    expect((await call('POST', '/api/api-keys', { body: '{"name":"console"}', headers: { cookie, 'content-type': 'application/json', origin } })).status).toBe(201);
    expect((await call('POST', '/api/api-keys', { body: '{"name":"cli"}', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } })).status).toBe(201);
    expect(await keys()).toBe(2);

    // The sandbox checkout's Pay button, posted as a browser posts the form on that page.
    const created = await call('POST', '/api/billing/payments', { body: JSON.stringify({ provider: 'card', amount: 5, currency: 'USD' }), headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
    const payment = (await created.json()) as { id: string; redirect_url: string };
    const page = await fetch(payment.redirect_url.replace(origin, base));
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(await page.text()).toContain(`action="/api/payments/sandbox/${payment.id}/pay"`);
    const paid = await call('POST', `/api/payments/sandbox/${payment.id}/pay`, { body: '', headers: { origin, 'content-type': form, cookie } });
    expect(paid.status).toBe(303);
    const after = (await (await call('GET', `/api/billing/payments/${payment.id}`, { headers: { authorization: `Bearer ${token}` } })).json()) as { status: string };
    expect(after.status).toBe('paid');
  });

  test('4. a stranger cannot lock an account out by failing its password', async () => {
    await register('lockout@example.com');
    const login = (password: string, address: string) =>
      call('POST', '/api/auth/login', { body: JSON.stringify({ identifier: 'lockout@example.com', password }), headers: { 'content-type': 'application/json', 'x-forwarded-for': address } });
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await login('wrong password', '198.51.100.66')).status);
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.at(-1)).toBe(429);
    expect((await login('correct horse battery', '198.51.100.99')).status).toBe(200);
  });

  test('6. the embedded database and everything else in DATA_DIR are closed to other accounts, whatever the umask', () => {
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    expect(openToOthers(dataDir)).toEqual([]);
  });

  test('5. the database belongs to its site: a China process on it stops at start-up (exit 2, one line)', async () => {
    expect(await cpd.stop(), cpd.logs()).toBe(0);
    const other = await refusedStart({ SITE: 'cn', DATA_DIR: dataDir, SECRET_KEY: SECRET, PORT: '0' }, work);
    expect(other.code).toBe(2);
    expect(other.stderr.trim().split('\n')).toEqual(['cpd: invalid configuration: SITE: this database belongs to the intl site; a SITE=cn process may not use it']);
  }, 120_000);
});

describe('the same on PostgreSQL, and the open-agent warning', () => {
  test('an intl process records its site; a cn process is refused; an open agent API on a public URL is logged', async () => {
    const db = await createEmptyPostgresDatabase();
    try {
      const intl = await startBinary({ env: { DATABASE_URL: db.url, SITE: 'intl', PUBLIC_URL: 'https://cpd.example.com', PAYMENT_MODE: 'sandbox', SECRET_KEY: SECRET } });
      const warnings = intl.logs().split('\n').filter((line) => line.includes('the agent API is open to anyone'));
      expect(warnings, intl.logs()).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 'warn' });
      expect(await intl.stop(), intl.logs()).toBe(0);
      const cwd = mkdtempSync(join(tmpdir(), 'cpd-security-pg-'));
      try {
        const cn = await refusedStart({ DATABASE_URL: db.url, SITE: 'cn', SECRET_KEY: SECRET }, cwd);
        expect(cn.code, cn.stderr).toBe(2);
        expect(cn.stderr.trim().split('\n')).toEqual(['cpd: invalid configuration: SITE: this database belongs to the intl site; a SITE=cn process may not use it']);
      } finally {
        rmSync(cwd, { recursive: true, force: true });
      }
      // With a key set, no warning.
      const closed = await startBinary({ env: { DATABASE_URL: db.url, SITE: 'intl', PUBLIC_URL: 'https://cpd.example.com', PAYMENT_MODE: 'sandbox', SECRET_KEY: SECRET, AGENT_CLOUD_API_KEY: 'operator-agent-key-0123456789' } });
      expect(closed.logs()).not.toContain('the agent API is open to anyone');
      const site = (await (await fetch(`${closed.url}/api/site`)).json()) as { features: Record<string, boolean> };
      expect(site.features).toMatchObject({ sandbox_payments: true, open_agents: false });
      expect(await closed.stop(), closed.logs()).toBe(0);
    } finally {
      await db.drop();
    }
  }, 120_000);
});

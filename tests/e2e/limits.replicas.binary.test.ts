/**
 * Rate limits shared by replicas, on the binary: three `dist/cpd serve` on one PostgreSQL behind a
 * round-robin proxy (tests/support/round-robin-proxy.ts). A named limit (RATE_LIMITS gateway, per
 * API key) and a key's rpm are hammered through the proxy: the replicas together admit the
 * configured limit within 10 %, not three times it. Then one replica is killed with SIGKILL: once
 * its heartbeat lapses the other two take over its share, and the total is the limit again.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { TEST_SECRET } from '../support/app';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from '../support/binary';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream';
import { type RoundRobinProxy, startRoundRobinProxy } from '../support/round-robin-proxy';
import { waitFor } from '../support/wait';

const MODEL = 'm1';
/** The named limit under test: 60 gateway requests per API key per hour (refill is negligible while hammering). */
const GATEWAY_LIMIT = 60;
/** The key rpm under test; below the gateway limit so the rpm is what refuses. */
const RPM = 24;
const CHAT = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] };

describe('rate limits shared by three replicas behind a round-robin proxy', () => {
  let db: TestDatabase;
  let up: FakeUpstream;
  let replicas: RunningBinary[] = [];
  let lb: RoundRobinProxy;
  let userToken = '';

  const call = async (method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${lb.url}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, body: (await res.json().catch(() => null)) as any };
  };

  /** The live count a replica last logged (1 until it has seen another). */
  const liveOf = (r: RunningBinary) => {
    let live = 1;
    for (const line of r.logs().split('\n')) {
      if (!line.includes('live replicas changed')) continue;
      live = (JSON.parse(line) as { replicas: number }).replicas;
    }
    return live;
  };

  const newKey = async (name: string, limits: Record<string, unknown> = {}) => {
    const res = await call('POST', '/api/api-keys', userToken, { name, ...limits });
    expect(res.status).toBe(201);
    return res.body.key as string;
  };

  /**
   * `total` gateway requests with `key` through the proxy, 12 at a time; the statuses and error
   * messages seen. `body` {} passes the gateway's named limit and stops at validation (400).
   */
  async function hammer(key: string, total: number, body: unknown) {
    const seen: Array<{ status: number; error: string; retryAfter: string | null }> = [];
    for (let sent = 0; sent < total; sent += 12) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(12, total - sent) }, () => call('POST', '/v1/chat/completions', key, body)),
      );
      for (const r of batch) seen.push({ status: r.status, error: r.body?.error ?? '', retryAfter: r.headers.get('retry-after') });
    }
    return seen;
  }

  const within10Percent = (allowed: number, limit: number) => {
    expect(allowed).toBeGreaterThanOrEqual(Math.floor(limit * 0.9));
    expect(allowed).toBeLessThanOrEqual(Math.ceil(limit * 1.1));
  };

  beforeAll(async () => {
    await ensureBuilt();
    [db, up] = await Promise.all([createTestDatabase('postgres'), startFakeUpstream({ models: [MODEL] })]);
    const env = {
      DATABASE_URL: db.url!,
      SECRET_KEY: TEST_SECRET,
      MODEL_BACKENDS: `${MODEL}=${up.url}`,
      TRUST_PROXY: 'true',
      // Every request comes from the proxy's one address: only the gateway limit is small.
      RATE_LIMITS: `register=1000/1m,login=1000/1m,gateway=${GATEWAY_LIMIT}/1h`,
    };
    replicas = await Promise.all([0, 1, 2].map(() => startBinary({ env })));
    lb = startRoundRobinProxy(replicas.map((r) => r.url));

    const cwd = mkdtempSync(join(tmpdir(), 'cpd-admin-'));
    const create = Bun.spawn([await ensureBuilt(), 'users', 'create', '--email', 'admin@example.com', '--password', 'admin password 123', '--admin'], {
      cwd,
      env: { ...baseEnv(), ...env, DATA_DIR: join(cwd, 'data') },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [code, err] = await Promise.all([create.exited, new Response(create.stderr).text()]);
    rmSync(cwd, { recursive: true, force: true });
    if (code !== 0) throw new Error(`cpd users create failed: ${err}`);
    const admin = await call('POST', '/api/auth/login', undefined, { identifier: 'admin@example.com', password: 'admin password 123' });
    expect(admin.status).toBe(200);
    const priced = await call('PUT', '/api/admin/billing/pricing/models', admin.body.token, { models: [{ slug: MODEL, unit: 'per_request', price: 0.002 }] });
    expect(priced.status).toBe(200);
    expect((await call('POST', '/api/auth/register', undefined, { email: 'user@example.com', password: 'user password 123' })).status).toBe(201);
    const login = await call('POST', '/api/auth/login', undefined, { identifier: 'user@example.com', password: 'user password 123' });
    expect(login.status).toBe(200);
    userToken = login.body.token;
    // Each replica counts all three once each has beaten after the last one joined.
    await waitFor(() => replicas.every((r) => liveOf(r) === 3), 'every replica counts 3 live replicas', { timeoutMs: 15_000 });
  }, 120_000);

  afterAll(async () => {
    lb?.close();
    await Promise.all(replicas.map((r) => r.stop('SIGKILL')));
    await up?.close();
    await db?.drop();
  });

  test(`a named limit (gateway=${GATEWAY_LIMIT}/1h per key) admits ${GATEWAY_LIMIT} ± 10 % in total, not 3 ×`, async () => {
    const key = await newKey('named');
    const seen = await hammer(key, 3 * GATEWAY_LIMIT, {});
    const allowed = seen.filter((s) => s.status === 400).length;
    const refused = seen.filter((s) => s.status === 429);
    expect(allowed + refused.length).toBe(seen.length);
    within10Percent(allowed, GATEWAY_LIMIT);
    // The share refills 20 per hour: 3 minutes until the next request.
    expect(refused[0]).toEqual({ status: 429, error: 'too many requests for this API key', retryAfter: '180' });
    for (const r of replicas) expect(lb.served.get(r.url)).toBeGreaterThanOrEqual(GATEWAY_LIMIT / 3);
  }, 60_000);

  test(`a key's rpm (${RPM}) admits ${RPM} ± 10 % in total, not 3 ×`, async () => {
    const key = await newKey('rpm', { rpm: RPM });
    // A priced model: the rpm admits, then the empty wallet refuses (402) without calling the
    // upstream. Twice the rpm: each replica sees 16, within its gateway share (20), over its rpm share (8).
    const seen = await hammer(key, 2 * RPM, CHAT);
    const byRpm = seen.filter((s) => s.status === 429 && s.error === `this API key allows ${RPM} requests per minute`);
    const allowed = seen.filter((s) => s.status === 402).length;
    expect(allowed + byRpm.length).toBe(seen.length);
    within10Percent(allowed, RPM);
    expect(byRpm[0]!.retryAfter).toMatch(/^\d+$/);
  }, 60_000);

  test('kill -9 of one replica: after its heartbeat lapses the other two take over its share', async () => {
    const [first, victim, third] = replicas as [RunningBinary, RunningBinary, RunningBinary];
    await victim.stop('SIGKILL');
    await waitFor(() => liveOf(first) === 2 && liveOf(third) === 2, 'the survivors count 2 live replicas', { timeoutMs: 20_000 });
    // The balancer takes the dead replica out of rotation (nginx after max_fails; the test proxy
    // would try it for every third request, and under concurrency may find it for all its tries).
    lb.close();
    lb = startRoundRobinProxy([first.url, third.url]);

    const named = await hammer(await newKey('named after kill'), 3 * GATEWAY_LIMIT, {});
    expect(named.every((s) => s.status === 400 || s.status === 429)).toBe(true);
    within10Percent(named.filter((s) => s.status === 400).length, GATEWAY_LIMIT);

    const rpm = await hammer(await newKey('rpm after kill', { rpm: RPM }), 2 * RPM, CHAT);
    expect(rpm.every((s) => s.status === 402 || (s.status === 429 && s.error.includes('requests per minute')))).toBe(true);
    within10Percent(rpm.filter((s) => s.status === 402).length, RPM);

    // The killed replica's row stays until it is an hour old; a graceful stop deletes its own.
    const rows = async () => (await db.database.query<{ n: number }>(sql`select count(*)::int as n from cpd_replicas`))[0]!.n;
    expect(await rows()).toBe(3);
    expect(await first.stop()).toBe(0);
    expect(await rows()).toBe(2);
    await waitFor(() => liveOf(third) === 1, 'the last replica counts itself alone', { timeoutMs: 20_000 });
  }, 90_000);
});

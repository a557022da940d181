/**
 * The replica test bed: three `dist/cpd serve` processes on one PostgreSQL database with one
 * SECRET_KEY, behind a round-robin proxy (tests/support/round-robin-proxy.ts). A mixed scenario
 * runs through the proxy; then every database connection is cut and restored; then one replica is
 * killed with SIGKILL in the middle of streams.
 * At the end, with the survivors drained by SIGTERM, the database must hold: every wallet's
 * balance equal to the sum of its ledger, one usage row per answered gateway request, and each
 * user charged exactly what their answered requests cost.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { sql } from 'drizzle-orm';
import { signSandboxNotification } from '../../src/modules/billing/providers/sandbox';
import { TEST_SECRET } from '../support/app';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from '../support/binary';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream';
import { BACKEND_HEADER, type RoundRobinProxy, startRoundRobinProxy } from '../support/round-robin-proxy';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait';

const MODEL = 'm1';
const TOPUP = 5;
const USERS = 6;

interface User {
  email: string;
  token: string;
  keys: Array<{ id: string; key: string }>;
  /** What the user's answered gateway requests cost, in micro-units, as the responses said. */
  chargedMicros: number;
  answered: number;
}

const micros = (major: number | string) => Math.round(Number(major) * 1_000_000);

describe('three replicas on one PostgreSQL behind a round-robin proxy', () => {
  let db: TestDatabase;
  let up: FakeUpstream;
  let replicas: RunningBinary[] = [];
  let lb: RoundRobinProxy;
  /** Between the replicas and PostgreSQL: cuts every database connection of all three at once. */
  let pgLink: TcpProxy;
  let adminToken = '';
  const users: User[] = [];
  /** Every status seen by the clients, through the proxy or directly, and whether the database was being cut then. */
  const statuses: Array<{ status: number; duringCut: boolean }> = [];
  let duringCut = false;

  const recordingFetch: typeof fetch = Object.assign(
    async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      const res = await fetch(input, init);
      statuses.push({ status: res.status, duringCut });
      return res;
    },
    { preconnect: fetch.preconnect },
  );

  const call = async (base: string, method: string, path: string, token?: string, body?: unknown) => {
    const res = await recordingFetch(`${base}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'manual',
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: res.headers.get('content-type')?.includes('json') && text ? JSON.parse(text) : null };
  };

  const openai = (base: string, key: string) => new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, fetch: recordingFetch });
  const setPrice = async (price: number) =>
    expect((await call(lb.url, 'PUT', '/api/admin/billing/pricing/models', adminToken, { models: [{ slug: MODEL, unit: 'per_request', price }] })).status).toBe(200);

  const answeredTotal = () => users.reduce((sum, u) => sum + u.answered, 0);
  const usageRows = async () => (await db.database.query<{ n: number }>(sql`select count(*)::int as n from router_usage`))[0]!.n;

  /** A JSON chat call; counted as answered (with its X-Cost) only when it is. */
  async function chatJson(base: string, user: User, key = user.keys.at(-1)!.key) {
    const res = await call(base, 'POST', '/v1/chat/completions', key, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    if (res.status === 200) {
      user.answered++;
      user.chargedMicros += micros(res.headers.get('x-cost')!);
    }
    return res;
  }

  beforeAll(async () => {
    await ensureBuilt();
    [db, up] = await Promise.all([createTestDatabase('postgres'), startFakeUpstream({ models: [MODEL] })]);
    const dbUrl = new URL(db.url!);
    pgLink = await startTcpProxy(Number(dbUrl.port || 5432), dbUrl.hostname);
    dbUrl.port = String(pgLink.port);
    const env = {
      DATABASE_URL: dbUrl.toString(),
      SECRET_KEY: TEST_SECRET,
      MODEL_BACKENDS: `${MODEL}=${up.url}`,
      TRUST_PROXY: 'true',
      // One client address (the loopback proxy) makes every request: the named limits are not under test here.
      RATE_LIMITS: 'register=1000/1m,login=1000/1m,download=1000/1m,gateway=100000/1m',
    };
    // The first migrates; the other two start on the migrated database (and would wait on its advisory lock).
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
    const login = await call(lb.url, 'POST', '/api/auth/login', undefined, { identifier: 'admin@example.com', password: 'admin password 123' });
    expect(login.status).toBe(200);
    adminToken = login.body.token;
  }, 120_000);

  afterAll(async () => {
    lb?.close();
    await Promise.all(replicas.map((r) => r.stop('SIGKILL')));
    await up?.close();
    await pgLink?.close();
    await db?.drop();
  });

  test('sign-ups, logins, keys, top-ups with webhook replays, gateway JSON and SSE, a download', async () => {
    await setPrice(0.002);
    await Promise.all(
      Array.from({ length: USERS }, async (_, i) => {
        const email = `user${i}@example.com`;
        const password = `replica password ${i}`;
        expect((await call(lb.url, 'POST', '/api/auth/register', undefined, { email, password })).status).toBe(201);
        const login = await call(lb.url, 'POST', '/api/auth/login', undefined, { identifier: email, password });
        expect(login.status).toBe(200);
        const user: User = { email, token: login.body.token, keys: [], chargedMicros: 0, answered: 0 };
        for (const name of ['first', 'second']) {
          const key = await call(lb.url, 'POST', '/api/api-keys', user.token, { name });
          expect(key.status).toBe(201);
          user.keys.push({ id: key.body.id, key: key.body.key });
        }
        users.push(user);

        // Top-up through the sandbox; the provider's signed notification arrives at all three
        // replicas at once (a provider's retries may land anywhere) and is credited once.
        const payment = await call(lb.url, 'POST', '/api/billing/payments', user.token, { provider: 'card', amount: TOPUP, currency: 'USD' });
        expect(payment.status).toBe(201);
        const note = signSandboxNotification(TEST_SECRET, { payment_id: payment.body.id, status: 'paid', amount: TOPUP.toFixed(2), currency: 'USD' });
        const replays = await Promise.all(
          replicas.map((r) => recordingFetch(`${r.url}/api/payments/webhooks/card`, { method: 'POST', body: note.body, headers: note.headers })),
        );
        expect(replays.map((r) => r.status)).toEqual([200, 200, 200]);
        expect((await call(lb.url, 'GET', '/api/billing/wallet', user.token)).body).toMatchObject({ balance: TOPUP, currency: 'USD' });
        if (i === 0) {
          const receipt = await call(lb.url, 'GET', `/api/billing/receipts/${payment.body.id}/download?token=${user.token}`);
          expect(receipt.status).toBe(200);
          expect(receipt.headers.get('content-disposition')).toStartWith('attachment;');
          expect(receipt.text).toContain(`${TOPUP.toFixed(2)} USD`);
        }

        // Gateway calls through the proxy, JSON and streamed, with the openai client.
        const client = openai(lb.url, user.keys[1]!.key);
        for (let n = 0; n < 3; n++) {
          const { data, response } = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
          expect(data.choices[0]!.message.content).toBeTruthy();
          user.answered++;
          user.chargedMicros += micros(response.headers.get('x-cost')!);
          let last: { usage?: { cost?: number } | null } | undefined;
          for await (const chunk of await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true })) last = chunk as typeof last;
          expect(last?.usage?.cost).toBe(0.002);
          user.answered++;
          user.chargedMicros += micros(last!.usage!.cost!);
        }
      }),
    );
    // Round robin spread the work over all three.
    for (const r of replicas) expect(lb.served.get(r.url)!).toBeGreaterThan(USERS);
  }, 60_000);

  test('a price change is used by every replica within 1 s (X-Cost)', async () => {
    await setPrice(0.003);
    const user = users[0]!;
    for (const r of replicas) {
      await waitFor(async () => (await chatJson(r.url, user)).headers.get('x-cost') === '0.003000', `X-Cost 0.003 on ${r.url}`, { timeoutMs: 1_000 });
    }
  });

  test('a revoked key is refused by every replica within 1 s, the other key still works', async () => {
    const user = users[1]!;
    const [revoked, kept] = user.keys as [User['keys'][number], User['keys'][number]];
    for (const r of replicas) expect((await chatJson(r.url, user, revoked.key)).status).toBe(200);
    expect((await call(lb.url, 'DELETE', `/api/api-keys/${revoked.id}`, user.token)).status).toBe(204);
    for (const r of replicas) {
      await waitFor(async () => (await chatJson(r.url, user, revoked.key)).status === 401, `key refused on ${r.url}`, { timeoutMs: 1_000 });
    }
    for (const r of replicas) {
      expect((await chatJson(r.url, user, revoked.key)).status).toBe(401);
      expect((await chatJson(r.url, user, kept.key)).status).toBe(200);
    }
  });

  test('every database connection cut: all three answer 503 on /healthz and writes, stay up, and recover without a restart', async () => {
    const user = users[2]!;
    const direct = async (r: RunningBinary, method: string, path: string, body?: unknown) => {
      const res = await fetch(`${r.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${user.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: await res.json().catch(() => null) };
    };
    // A usage row commits before its answer: every answered request is in the database already.
    expect(await usageRows()).toBe(answeredTotal());
    duringCut = true;
    pgLink.cut();
    try {
      for (const r of replicas) {
        await waitFor(async () => (await direct(r, 'GET', '/healthz')).status === 503, `/healthz 503 on ${r.url}`);
        expect(await direct(r, 'POST', '/api/api-keys', { name: 'while cut' })).toEqual({ status: 503, body: { error: 'database unavailable' } });
      }
    } finally {
      pgLink.restore();
    }
    for (const r of replicas) await waitFor(async () => (await direct(r, 'GET', '/healthz')).status === 200, `/healthz 200 again on ${r.url}`);
    // No replica died of the cut (a write racing the closed socket once ended the process).
    for (const r of replicas) expect({ exit: r.proc.exitCode, signal: r.proc.signalCode }).toEqual({ exit: null, signal: null });
    // Nothing written while cut: the refused key does not exist.
    expect((await call(lb.url, 'GET', '/api/api-keys', user.token)).body.map((k: { name: string }) => k.name)).not.toContain('while cut');

    // A revocation and a price change made now reach all three without a restart. Each LISTEN
    // connection comes back on its own reconnect backoff and its replica reloads then (a change
    // sent while it was away is not lost), so no 1 s bound right after the cut.
    const [revoked] = user.keys as [User['keys'][number]];
    for (const r of replicas) expect((await chatJson(r.url, user, revoked.key)).status).toBe(200);
    expect((await call(lb.url, 'DELETE', `/api/api-keys/${revoked.id}`, user.token)).status).toBe(204);
    await setPrice(0.004);
    for (const r of replicas) {
      await waitFor(async () => (await chatJson(r.url, user, revoked.key)).status === 401, `key refused on ${r.url} after the cut`, { timeoutMs: 15_000 });
      await waitFor(async () => (await chatJson(r.url, user)).headers.get('x-cost') === '0.004000', `X-Cost 0.004 on ${r.url} after the cut`, { timeoutMs: 15_000 });
    }
    duringCut = false;
  }, 60_000);

  test('kill -9 of one replica mid-stream fails its streams only; nobody pays for them; the others carry on', async () => {
    // Every answer so far, the victim's included, has its usage committed (it commits before the answer).
    expect(await usageRows()).toBe(answeredTotal());
    up.set({ content: Array.from({ length: 60 }, (_, i) => `word${i}`).join(' '), chunkDelayMs: 50 });
    const victim = replicas[1]!;
    const streams = await Promise.all(
      Array.from({ length: 9 }, async (_, i) => {
        const user = users[i % USERS]!;
        const { data, response } = await openai(lb.url, user.keys.at(-1)!.key)
          .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'long' }], stream: true })
          .withResponse();
        const iterator = data[Symbol.asyncIterator]();
        expect((await iterator.next()).done).toBe(false); // the first chunk arrived: the stream is in flight
        return { user, backend: response.headers.get(BACKEND_HEADER)!, iterator };
      }),
    );
    expect(streams.filter((s) => s.backend === victim.url).length).toBeGreaterThan(0);
    await victim.stop('SIGKILL');

    const outcomes = await Promise.all(
      streams.map(async (s) => {
        let cost: number | null = null;
        try {
          for (let r = await s.iterator.next(); !r.done; r = await s.iterator.next()) {
            const usage = (r.value as { usage?: { cost?: number } | null }).usage;
            if (usage) cost = usage.cost ?? null;
          }
        } catch {
          // The connection broke: this client's stream failed.
        }
        if (cost !== null) {
          s.user.answered++;
          s.user.chargedMicros += micros(cost);
        }
        return { onVictim: s.backend === victim.url, completed: cost !== null };
      }),
    );
    for (const o of outcomes) expect(o.completed).toBe(!o.onVictim);

    // The survivors carry on through the proxy (which skips the dead replica, as nginx does).
    up.set({ chunkDelayMs: 0 });
    for (let n = 0; n < 6; n++) expect((await chatJson(lb.url, users[n % USERS]!)).status).toBe(200);
  }, 60_000);

  test('invariants: ledger == balance everywhere, one usage row per answered request, charges as answered, no 5xx', async () => {
    // SIGTERM drains every queued usage row and debit before exit.
    const survivors = replicas.filter((r) => r.proc.signalCode === null && r.proc.exitCode === null);
    expect(await Promise.all(survivors.map((r) => r.stop()))).toEqual(survivors.map(() => 0));

    const wallets = await db.database.query<{ user_id: string; balance: string; ledger: string }>(sql`
      select w.user_id, w.balance_micros::text as balance, coalesce(sum(t.amount_micros), 0)::text as ledger
      from wallets w left join wallet_transactions t on t.user_id = w.user_id group by w.user_id, w.balance_micros`);
    expect(wallets.length).toBeGreaterThanOrEqual(USERS);
    for (const w of wallets) expect(w.ledger).toBe(w.balance);

    expect(await usageRows()).toBe(answeredTotal());

    const byEmail = await db.database.query<{ email: string; balance: string }>(sql`
      select u.email, w.balance_micros::text as balance from users u join wallets w on w.user_id = u.id`);
    for (const user of users) {
      expect(byEmail.find((b) => b.email === user.email)?.balance).toBe(String(micros(TOPUP) - user.chargedMicros));
    }
    expect(statuses.filter((s) => s.status >= 500 && !s.duringCut)).toEqual([]);
    // While the database was cut and its pooled connections were being replaced: 503 only.
    expect(statuses.filter((s) => s.status >= 500 && s.status !== 503)).toEqual([]);
  });
});

/**
 * The database refusing to serve, on dist/cpd as a process: a PostgreSQL cluster of the test's
 * own (tests/support/private-postgres.ts) with a hot standby, cpd connected through a TCP proxy as
 * a login role that is not a superuser (superusers bypass CONNECT privileges). Mid-stream, the
 * database stops serving in three ways PostgreSQL says with an SQLSTATE cpd did not know:
 *  - `ALTER DATABASE … ALLOW_CONNECTIONS false` and its backends terminated: 55000;
 *  - CONNECT revoked from cpd's role and its backends terminated: 42501 while connecting;
 *  - the address moved to a standby, as after a failover: 25006 on every write.
 * Before, the usage row of the stream was set aside, its set-aside insert failed the same way, and
 * the row was gone: after recovery no usage row, no debit, no set-aside row; register answered 500.
 * Now, in both usage modes (commit before the answer, and USAGE_JOURNAL=on), the row is retried
 * until the database serves again and is billed once; every route answers 503 {"error":"database
 * unavailable"} while refused (reads still work on the standby) and changes nothing; every balance
 * equals its ledger. Last, a row refused for good whose set-aside insert is refused too is kept in
 * DATA_DIR/usage-set-aside, and the next start (two processes at once, after a SIGKILL) stores it once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { buildApp } from '../../src/app';
import { type Database, openDatabase } from '../../src/platform/db';
import { createTestContext } from '../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../support/binary';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream';
import { makeApiKey } from '../support/make';
import { type PrivatePostgres, type Standby, startPrivatePostgres } from '../support/private-postgres';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait';

const ROLE = 'cpd_app';
/** 1000 per million tokens: a request of 10 prompt + 5 completion tokens costs 15000 micro-units. */
const REQUEST_COST = 15_000n;
const PASSWORD = 'correct horse battery';
const UNAVAILABLE = { error: 'database unavailable' };

let pg: PrivatePostgres;
let standby: Standby;
let proxy: TcpProxy;
let up: FakeUpstream;
/** A superuser on the primary's `postgres` database: ALTER DATABASE, terminations, grants. */
let admin: postgres.Sql;
/** A superuser on cpd's database, straight to the primary: setup and checks. */
let direct: Database;
let directUrl: string;
/** cpd's DATABASE_URL: its own role, through the proxy. */
let appUrl: string;
const running = new Set<RunningBinary>();
const dirs: string[] = [];

beforeAll(async () => {
  await ensureBuilt();
  pg = await startPrivatePostgres();
  admin = postgres(`${pg.url}/postgres`, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create role ${ROLE} login`);
  await admin.unsafe(`create database cpd owner ${ROLE}`);
  standby = await pg.startStandby();
  proxy = await startTcpProxy(pg.port);
  appUrl = `postgres://${ROLE}@127.0.0.1:${proxy.port}/cpd`;
  directUrl = `${pg.url}/cpd`;
  up = await startFakeUpstream({ models: ['m1'] });
}, 120_000);

afterAll(async () => {
  for (const cpd of running) await cpd.stop('SIGKILL');
  await up?.close();
  await direct?.close();
  await admin?.end();
  await proxy?.close();
  await standby?.close();
  await pg?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** `cpd serve` as cpd's role through the proxy, in `dir` (its DATA_DIR is `dir`/data); the first one migrates. */
async function serve(dir: string, env: Record<string, string> = {}): Promise<RunningBinary> {
  const cpd = await startBinary({ cwd: dir, env: { DATABASE_URL: appUrl, MODEL_BACKENDS: `m1=${up.url}`, ...env } });
  running.add(cpd);
  direct ??= await openDatabase({ databaseUrl: directUrl, maxConnections: 2 });
  return cpd;
}

async function stop(cpd: RunningBinary, signal: NodeJS.Signals) {
  const code = await cpd.stop(signal);
  running.delete(cpd);
  return code;
}

function workDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cpd-refused-'));
  dirs.push(dir);
  return dir;
}

/** A user with `balanceMicros` and an API key, made through the app's own services (as the superuser). */
async function fundedKey(balanceMicros: bigint, opts: { admin?: boolean } = {}): Promise<{ userId: string; email: string; key: string }> {
  const tc = await createTestContext('postgres', {}, { testDb: { database: direct, url: directUrl, drop: async () => {} } });
  const { services } = await buildApp(tc.ctx);
  await services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
  const email = `u${crypto.randomUUID().slice(0, 8)}@example.com`;
  const user = await services.accounts.createUser({ email, password: PASSWORD });
  if (opts.admin) await direct.query(sql`update users set is_admin = true where id = ${user.id}`);
  const key = (await makeApiKey({ services }, user.id)).key;
  if (balanceMicros > 0n)
    await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: balanceMicros, reference: `funds-${user.id}`, description: 'funds' });
  await tc.close();
  return { userId: user.id, email, key };
}

async function call(base: string, method: string, path: string, init: { token?: string; body?: unknown } = {}) {
  const res = await fetch(base + path, {
    method,
    headers: { ...(init.token ? { authorization: `Bearer ${init.token}` } : {}), ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body };
}

const chatBody = (stream: boolean) => ({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, stream });

/** A streamed completion read as it arrives: `got.text` grows, `got.done` once the stream ended. */
function openStream(base: string, key: string, id: string) {
  const got = { status: 0, text: '', done: false };
  const finished = fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify(chatBody(true)),
  })
    .then(async (res) => {
      got.status = res.status;
      const decoder = new TextDecoder();
      for await (const chunk of res.body!) got.text += decoder.decode(chunk, { stream: true });
    })
    .catch(() => {})
    .finally(() => {
      got.done = true;
    });
  return { got, finished };
}

/** The request ids of `userId`'s usage rows that have their ledger entry. */
async function billedIds(userId: string): Promise<Set<string>> {
  const rows = await direct.query<{ request_id: string }>(sql`
    select u.request_id from router_usage u join wallet_transactions t on t.reference = 'usage:' || u.id where u.user_id = ${userId}`);
  return new Set(rows.map((r) => r.request_id));
}

const balanceOf = async (userId: string) => BigInt((await direct.query<{ b: string }>(sql`select balance_micros::text as b from wallets where user_id = ${userId}`))[0]!.b);

async function expectBooksBalanced() {
  const mismatched = await direct.query(sql`
    select w.user_id from wallets w left join (select user_id, sum(amount_micros) as s from wallet_transactions group by user_id) t using (user_id)
    where w.balance_micros <> coalesce(t.s, 0)`);
  expect(mismatched).toEqual([]);
}

/** Ends every connection cpd's role holds to its database (the next ones meet the refusal). */
const terminateApp = () => admin.unsafe(`select pg_terminate_backend(pid) from pg_stat_activity where datname = 'cpd' and usename = '${ROLE}'`);

interface Fault {
  name: string;
  apply(): Promise<void>;
  lift(): Promise<void>;
  /** False: a standby still serves reads. */
  refusesReads: boolean;
}

/** Whether `cpd` already meets the fault: its health check (a read) or, on a standby, a write refused. */
async function meetsRefusal(cpd: RunningBinary, fault: Fault): Promise<boolean> {
  if (fault.refusesReads) return (await call(cpd.url, 'GET', '/healthz')).status === 503;
  const probe = await call(cpd.url, 'POST', '/api/auth/register', { body: { email: `probe${crypto.randomUUID().slice(0, 8)}@example.com`, password: PASSWORD } });
  return probe.status >= 500; // 503; an unknown refusal was a 500
}

const FAULTS: Fault[] = [
  {
    name: 'ALLOW_CONNECTIONS false (55000)',
    apply: async () => {
      await admin.unsafe('alter database cpd allow_connections false');
      await terminateApp();
    },
    lift: async () => {
      await admin.unsafe('alter database cpd allow_connections true');
    },
    refusesReads: true,
  },
  {
    name: `CONNECT revoked from ${ROLE} (42501 while connecting)`,
    apply: async () => {
      await admin.unsafe(`revoke connect on database cpd from public, ${ROLE}`);
      await terminateApp();
    },
    lift: async () => {
      await admin.unsafe(`grant connect on database cpd to public, ${ROLE}`);
    },
    refusesReads: true,
  },
  {
    name: 'the address moved to a hot standby after a failover (25006)',
    apply: async () => {
      await standby.caughtUp();
      proxy.retarget(standby.port);
    },
    lift: async () => {
      proxy.retarget(pg.port);
    },
    refusesReads: false,
  },
];

/**
 * A stream is paused after its first chunk; the fault is applied; the stream then ends at the
 * upstream, and its usage row meets the refusal. `whileRefused` runs before the fault is lifted.
 */
async function streamThroughFault(cpd: RunningBinary, fault: Fault, id: string, journaled: boolean, whileRefused: () => Promise<void> = async () => {}) {
  const u = await fundedKey(1_000_000n);
  const logsBefore = cpd.logs().length;
  const newLogs = () => cpd.logs().slice(logsBefore);
  const gate = Promise.withResolvers<void>();
  up.set({ hold: { afterFrames: 2, until: gate.promise } });
  const completed = up.stats.streamsCompleted;
  const s = openStream(cpd.url, u.key, id);
  await waitFor(() => s.got.text.includes('Hello'), 'the first chunk');
  await fault.apply();
  try {
    // Refused before the stream ends, so the usage write's first try meets the refusal itself.
    await waitFor(() => meetsRefusal(cpd, fault), 'cpd to meet the refusal');
    gate.resolve();
    await waitFor(() => up.stats.streamsCompleted > completed, 'the upstream to end its stream');
    // Every content chunk reached the client; the usage write meets the refusal.
    await waitFor(() => s.got.text.includes('upstream.'), 'the last content chunk');
    await waitFor(() => /usage: (database unavailable; retrying|row set aside)/.test(newLogs()), 'the usage write to meet the refusal');
    if (journaled) await s.finished; // answered at once, before its commit
    else expect(s.got.text).not.toContain('[DONE]'); // the answer's end waits for its commit
    await whileRefused();
  } finally {
    await fault.lift();
    up.reset();
  }
  await s.finished;
  expect(s.got.status).toBe(200);
  expect(s.got.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  // Before: no usage row, no debit, no set-aside row.
  await waitFor(async () => (await billedIds(u.userId)).has(id), `the usage row of ${id} and its debit`, { timeoutMs: 20_000 });
  expect(await balanceOf(u.userId)).toBe(1_000_000n - REQUEST_COST);
  expect(await direct.query(sql`select id from router_usage_set_aside where row->>'request_id' = ${id}`)).toEqual([]);
  expect(newLogs()).not.toContain('row set aside');
  await expectBooksBalanced();
}

describe('usage rows while the database refuses (commit before the answer)', () => {
  let dir: string;
  let cpd: RunningBinary;
  beforeAll(async () => {
    dir = workDir();
    // A gateway call whose wallet grant cannot be written waits this long for the database before its 503.
    cpd = await serve(dir, { ROUTER_ADMISSION_WAIT: '1s' });
  }, 60_000);

  for (const [i, fault] of FAULTS.entries()) {
    test(`${fault.name}: the row is retried until the database serves again, and billed once; every route answers 503 meanwhile and changes nothing`, async () => {
      const member = await fundedKey(1_000_000n);
      const boss = await fundedKey(0n, { admin: true });
      const stranger = await fundedKey(1_000_000n); // a key this process has never seen
      const login = async (email: string) => (await call(cpd.url, 'POST', '/api/auth/login', { body: { identifier: email, password: PASSWORD } })).body as { token: string };
      const memberToken = (await login(member.email)).token;
      const bossToken = (await login(boss.email)).token;
      const keysOf = async () => (await call(cpd.url, 'GET', '/api/api-keys', { token: memberToken })).body as unknown[];
      const keysBefore = (await keysOf()).length;
      const newcomer = `new${i}@example.com`;

      await streamThroughFault(cpd, fault, `refused-${i}`, false, async () => {
        const writes = [
          await call(cpd.url, 'POST', '/api/auth/register', { body: { email: newcomer, password: PASSWORD } }),
          await call(cpd.url, 'POST', '/api/auth/login', { body: { identifier: member.email, password: PASSWORD } }),
          await call(cpd.url, 'POST', '/api/api-keys', { token: memberToken, body: { name: 'while refused' } }),
          await call(cpd.url, 'POST', '/v1/chat/completions', { token: stranger.key, body: chatBody(false) }),
        ];
        expect(writes).toEqual(Array(writes.length).fill({ status: 503, body: UNAVAILABLE }));
        const reads = [await call(cpd.url, 'GET', '/api/admin/users', { token: bossToken }), await call(cpd.url, 'GET', '/api/billing/wallet', { token: memberToken })];
        if (fault.refusesReads) expect(reads).toEqual(Array(reads.length).fill({ status: 503, body: UNAVAILABLE }));
        else expect(reads.map((r) => r.status)).toEqual([200, 200]);
      });

      // Nothing the refused calls asked for happened.
      expect((await call(cpd.url, 'POST', '/api/auth/login', { body: { identifier: newcomer, password: PASSWORD } })).status).toBe(401);
      expect((await keysOf()).length).toBe(keysBefore);
      expect(await balanceOf(stranger.userId)).toBe(1_000_000n);
      expect((await billedIds(stranger.userId)).size).toBe(0);
      expect(cpd.logs()).not.toContain('"msg":"unhandled error"');
    }, 90_000);
  }

  test('the server stops cleanly afterwards', async () => {
    expect(await stop(cpd, 'SIGTERM')).toBe(0);
  });
});

describe('usage rows while the database refuses (USAGE_JOURNAL=on)', () => {
  let cpd: RunningBinary;
  beforeAll(async () => {
    cpd = await serve(workDir(), { USAGE_JOURNAL: 'on' });
  }, 60_000);

  for (const [i, fault] of FAULTS.entries()) {
    test(`${fault.name}: the answer leaves at once; the row is written once the database serves again`, async () => {
      await streamThroughFault(cpd, fault, `journaled-${i}`, true);
    }, 90_000);
  }

  test('the server stops cleanly afterwards', async () => {
    expect(cpd.logs()).not.toContain('"msg":"unhandled error"');
    expect(await stop(cpd, 'SIGTERM')).toBe(0);
  });
});

describe('a row refused for good whose set-aside insert is refused too', () => {
  test('is kept in DATA_DIR/usage-set-aside; after a SIGKILL, two processes starting on that DATA_DIR store it once and remove the file', async () => {
    const dir = workDir();
    const setAsideFiles = () => {
      try {
        return readdirSync(join(dir, 'data/usage-set-aside')).filter((n) => n.endsWith('.jsonl'));
      } catch {
        return [];
      }
    };
    const cpd = await serve(dir);
    const u = await fundedKey(1_000_000n);
    // A permission the role lacks is a refusal of the rows (42501 raised by the query), not an outage.
    const owner = postgres(directUrl, { max: 1, onnotice: () => {} });
    await owner.unsafe(`revoke insert on router_usage, router_usage_set_aside from ${ROLE}`);
    try {
      const res = await fetch(`${cpd.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${u.key}`, 'content-type': 'application/json', 'x-request-id': 'aside-1' },
        body: JSON.stringify(chatBody(false)),
      });
      expect(res.status).toBe(503); // not answered: nothing was billed
      // Before: "could not record a row set aside", and the row was gone.
      expect(setAsideFiles()).toHaveLength(1);
      const line = JSON.parse(readFileSync(join(dir, 'data/usage-set-aside', setAsideFiles()[0]!), 'utf8').trim());
      expect(line.reason).toMatch(/permission denied for table router_usage/);
      expect(line.row).toMatchObject({ u: u.userId, q: 'aside-1' });
    } finally {
      await owner.unsafe(`grant insert on router_usage, router_usage_set_aside to ${ROLE}`);
      await owner.end();
    }
    await stop(cpd, 'SIGKILL');
    expect(setAsideFiles()).toHaveLength(1);
    const both = await Promise.all([serve(dir), serve(dir)]);
    await waitFor(() => setAsideFiles().length === 0, 'the set-aside file to be stored and removed');
    const rows = await direct.query<{ user_id: string; reason: string }>(sql`select user_id, reason from router_usage_set_aside where row->>'request_id' = 'aside-1'`);
    expect(rows).toEqual([{ user_id: u.userId, reason: expect.stringMatching(/permission denied for table router_usage/) }]);
    expect((await billedIds(u.userId)).size).toBe(0);
    expect(await balanceOf(u.userId)).toBe(1_000_000n);
    await expectBooksBalanced();
    for (const cpd of both) expect(await stop(cpd, 'SIGTERM')).toBe(0);
  }, 90_000);
});

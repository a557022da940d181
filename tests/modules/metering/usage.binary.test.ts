/**
 * Money when processes die, on `dist/cpd` and real PostgreSQL: SIGKILL at a random moment under
 * 200 concurrent requests, a locked wallet row, SIGTERM with the database away, and two and three
 * replicas spending one wallet; the same deaths with the usage journal (USAGE_JOURNAL=on), where
 * answers leave before their commit and a restart bills them. After each: every balance equals its ledger, every answered request
 * has its usage row and debit, no 402 while the balance is positive.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { makeApiKey } from '../../support/make';
import { type TcpProxy, startTcpProxy } from '../../support/tcp-proxy';
import { waitFor } from '../../support/wait';

// 1000 per million tokens: a request of 10 prompt + 5 completion tokens costs 15000 micro-units.
const REQUEST_COST = 15_000n;

let db: TestDatabase;
let up: FakeUpstream;
const running = new Set<RunningBinary>();

beforeAll(async () => {
  await ensureBuilt();
  db = await createTestDatabase('postgres');
  up = await startFakeUpstream({ models: ['m1'] });
}, 120_000);
afterAll(async () => {
  for (const cpd of running) await cpd.stop('SIGKILL');
  await up?.close();
  await db?.drop();
});

/** A user with `balanceMicros` and an API key, made through the app's own services. */
async function fundedKey(balanceMicros: bigint): Promise<{ userId: string; key: string }> {
  const tc = await createTestContext('postgres', {}, { testDb: db });
  const { services } = await buildApp(tc.ctx);
  await services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
  const user = await services.accounts.createUser({ email: `u${crypto.randomUUID().slice(0, 8)}@example.com`, password: 'binary-password' });
  const key = (await makeApiKey({ services }, user.id)).key;
  await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: balanceMicros, reference: `funds-${user.id}`, description: 'funds' });
  await tc.close();
  return { userId: user.id, key };
}

async function serve(env: Record<string, string> = {}, cwd?: string): Promise<RunningBinary> {
  const cpd = await startBinary({ env: { DATABASE_URL: db.url!, MODEL_BACKENDS: `m1=${up.url}`, RATE_LIMITS: 'gateway=100000/1m', ...env }, cwd });
  running.add(cpd);
  return cpd;
}

async function stop(cpd: RunningBinary, signal: NodeJS.Signals) {
  const code = await cpd.stop(signal);
  running.delete(cpd);
  return code;
}

/**
 * One request; resolves 200 only when the whole answer arrived (the JSON body, or a stream up to
 * `[DONE]`), else the status or 0 when the connection broke.
 */
async function request(url: string, key: string, id: string, stream: boolean): Promise<number> {
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, stream }),
    });
    const text = await res.text();
    if (res.status !== 200) return res.status;
    if (stream) return text.trimEnd().endsWith('data: [DONE]') ? 200 : 0;
    return JSON.parse(text).usage ? 200 : 0;
  } catch {
    return 0;
  }
}

async function expectBooksBalanced() {
  const mismatched = await db.database.query(sql`
    select w.user_id from wallets w left join (select user_id, sum(amount_micros) as s from wallet_transactions group by user_id) t using (user_id)
    where w.balance_micros <> coalesce(t.s, 0)`);
  expect(mismatched).toEqual([]);
}

/** The request ids of `userId`'s usage rows answered 200 that have their ledger entry. */
async function billedIds(userId: string): Promise<Set<string>> {
  const rows = await db.database.query<{ request_id: string }>(sql`
    select u.request_id from router_usage u join wallet_transactions t on t.reference = 'usage:' || u.id
    where u.user_id = ${userId} and u.status = 200`);
  return new Set(rows.map((r) => r.request_id));
}

/** 200 concurrent requests (every other one streamed), SIGKILL at a random moment; the ids answered in full. */
async function killUnderLoad(cpd: RunningBinary, key: string, prefix: string): Promise<string[]> {
  up.set({ chunkDelayMs: 3, firstByteDelayMs: 2 });
  const before = up.requests.length;
  const ids = Array.from({ length: 200 }, (_, i) => `${prefix}-${i}`);
  const results = Promise.all(ids.map((id, i) => request(cpd.url, key, id, i % 2 === 1)));
  // A random moment: after a random number of requests reached the upstream.
  const moment = 20 + Math.floor(Math.random() * 150);
  await waitFor(() => up.requests.length - before >= moment, 'requests in flight');
  await stop(cpd, 'SIGKILL');
  const statuses = await results;
  return ids.filter((_, i) => statuses[i] === 200);
}

/** Holds `userId`'s wallet row locked (FOR UPDATE) in another session until the returned function is called. */
async function lockWallet(userId: string): Promise<() => Promise<void>> {
  const locker = postgres(db.url!, { max: 1, onnotice: () => {} });
  const locked = Promise.withResolvers<void>();
  const release = Promise.withResolvers<void>();
  const holding = locker.begin(async (tx) => {
    await tx`select 1 from wallets where user_id = ${userId} for update`;
    locked.resolve();
    await release.promise;
  });
  await locked.promise;
  return async () => {
    release.resolve();
    await holding;
    await locker.end();
  };
}

const balanceOf = async (userId: string) =>
  BigInt((await db.database.query<{ b: string }>(sql`select balance_micros::text as b from wallets where user_id = ${userId}`))[0]!.b);

describe('usage survives the process (binary, postgres)', () => {
  test('SIGKILL at a random moment under 200 concurrent requests: every answered request is billed', async () => {
    const { userId, key } = await fundedKey(1_000_000_000n);
    const cpd = await serve();
    const answered = await killUnderLoad(cpd, key, 'kill');
    const billed = await billedIds(userId);
    expect(answered.filter((id) => !billed.has(id))).toEqual([]);
    expect(billed.size).toBeGreaterThanOrEqual(answered.length);
    expect(await balanceOf(userId)).toBe(1_000_000_000n - BigInt(billed.size) * REQUEST_COST);
    await expectBooksBalanced();
    up.reset();
  }, 120_000);

  test('with the wallet row locked no answer leaves before its debit commits; SIGKILL then loses only unanswered requests', async () => {
    const { userId, key } = await fundedKey(1_000_000_000n);
    const cpd = await serve();
    // Admit once, so the grant exists and the admission needs no lock.
    expect(await request(cpd.url, key, 'lock-0', false)).toBe(200);
    const unlock = await lockWallet(userId);
    const before = up.requests.length;
    let answeredWhileLocked = 0;
    const results = Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        request(cpd.url, key, `lock-${i + 1}`, i % 2 === 1).then((s) => {
          if (s === 200) answeredWhileLocked++;
          return s;
        }),
      ),
    );
    await waitFor(() => up.requests.length - before >= 25, 'the upstream to answer all 25');
    await stop(cpd, 'SIGKILL');
    await unlock();
    await results;
    expect(answeredWhileLocked).toBe(0);
    expect(await billedIds(userId)).toEqual(new Set(['lock-0']));
    expect(await balanceOf(userId)).toBe(1_000_000_000n - REQUEST_COST);
    await expectBooksBalanced();
  }, 120_000);
});

describe('the usage journal (binary, postgres, USAGE_JOURNAL=on)', () => {
  const JOURNAL = { USAGE_JOURNAL: 'on' };
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cpd-journal-e2e-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const journalFiles = () => readdirSync(join(dir, 'data/journal/usage')).filter((n) => n.endsWith('.jsonl'));

  test('with the wallet row locked, answers leave before their commit; after SIGKILL a restart on the same DATA_DIR bills every one', async () => {
    const { userId, key } = await fundedKey(1_000_000_000n);
    const cpd = await serve(JOURNAL, dir);
    expect(await request(cpd.url, key, 'jlock-0', false)).toBe(200);
    await waitFor(async () => (await billedIds(userId)).size === 1, 'the first request to be committed');
    const unlock = await lockWallet(userId);
    const statuses = await Promise.all(Array.from({ length: 25 }, (_, i) => request(cpd.url, key, `jlock-${i + 1}`, i % 2 === 1)));
    // All answered while their commit waits on the lock: nothing of them is in the database yet.
    expect(statuses).toEqual(Array(25).fill(200));
    expect(await billedIds(userId)).toEqual(new Set(['jlock-0']));
    expect(journalFiles().length).toBeGreaterThan(0);
    await stop(cpd, 'SIGKILL');
    await unlock();
    expect(await billedIds(userId)).toEqual(new Set(['jlock-0']));
    // The next process on this DATA_DIR ships what the killed one journaled.
    const next = await serve(JOURNAL, dir);
    await waitFor(() => journalFiles().length === 0, 'the journal to be shipped');
    const billed = await billedIds(userId);
    expect(billed.size).toBe(26);
    expect(await balanceOf(userId)).toBe(1_000_000_000n - 26n * REQUEST_COST);
    await expectBooksBalanced();
    expect(await stop(next, 'SIGTERM')).toBe(0);
  }, 120_000);

  test('SIGKILL at a random moment under 200 concurrent requests, then a restart: every answered request is billed once', async () => {
    const { userId, key } = await fundedKey(1_000_000_000n);
    const cpd = await serve(JOURNAL, dir);
    const answered = await killUnderLoad(cpd, key, 'jkill');
    const next = await serve(JOURNAL, dir);
    await waitFor(() => journalFiles().length === 0, 'the journal to be shipped');
    const billed = await billedIds(userId);
    expect(answered.filter((id) => !billed.has(id))).toEqual([]);
    expect(await balanceOf(userId)).toBe(1_000_000_000n - BigInt(billed.size) * REQUEST_COST);
    await expectBooksBalanced();
    expect(await stop(next, 'SIGTERM')).toBe(0);
    up.reset();
  }, 120_000);
});

describe('SIGTERM with the database away (binary, postgres)', () => {
  let proxy: TcpProxy;
  beforeAll(async () => {
    proxy = await startTcpProxy(5432);
  });
  afterAll(() => proxy.close());

  test('queued rows are logged as not written before the process exits, and none of their requests was answered', async () => {
    const { userId, key } = await fundedKey(1_000_000_000n);
    const viaProxy = new URL(db.url!);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const cpd = await serve({ DATABASE_URL: viaProxy.toString() });
    expect(await request(cpd.url, key, 'term-0', false)).toBe(200);
    const before = up.requests.length;
    proxy.cut();
    let stopped = false;
    const results = Promise.all(Array.from({ length: 30 }, (_, i) => request(cpd.url, key, `term-${i + 1}`, i % 2 === 1)));
    // Admitted against the grant taken above, so every one reaches the upstream and then waits for its commit.
    await waitFor(() => up.requests.length - before >= 30, 'answers waiting for their commit');
    const exit = stop(cpd, 'SIGTERM').then((code) => {
      stopped = true;
      return code;
    });
    const statuses = await results;
    await exit;
    expect(stopped).toBe(true);
    proxy.restore();
    expect(statuses.filter((s) => s === 200)).toEqual([]);
    const notWritten = cpd.logs().split('\n').filter((l) => l.includes('usage: row not written before shutdown'));
    expect(notWritten).toHaveLength(30);
    expect(await billedIds(userId)).toEqual(new Set(['term-0']));
    await expectBooksBalanced();
  }, 120_000);

  test('with the journal, the requests are answered; rows not written by the deadline stay in it and the next start bills them', async () => {
    const { userId, key } = await fundedKey(1_000_000_000n);
    const dir = mkdtempSync(join(tmpdir(), 'cpd-journal-term-'));
    const viaProxy = new URL(db.url!);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const env = { DATABASE_URL: viaProxy.toString(), USAGE_JOURNAL: 'on' };
    try {
      const cpd = await serve(env, dir);
      expect(await request(cpd.url, key, 'jterm-0', false)).toBe(200);
      await waitFor(async () => (await billedIds(userId)).size === 1, 'the first request to be committed');
      proxy.cut();
      const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) => request(cpd.url, key, `jterm-${i + 1}`, i % 2 === 1)));
      expect(statuses).toEqual(Array(30).fill(200));
      // Exit 1: with the database away, giving grants back does not finish within the process's deadline.
      await stop(cpd, 'SIGTERM');
      expect(cpd.logs().split('\n').filter((l) => l.includes('usage: row not written before shutdown'))).toHaveLength(30);
      expect(cpd.logs()).toMatch(/usage journal: rows not written are kept for the next start","rows":30/);
      expect(await billedIds(userId)).toEqual(new Set(['jterm-0']));
      proxy.restore();
      const next = await serve(env, dir);
      await waitFor(async () => (await billedIds(userId)).size === 31, 'the kept journal to be billed');
      expect(await balanceOf(userId)).toBe(1_000_000_000n - 31n * REQUEST_COST);
      await expectBooksBalanced();
      expect(await stop(next, 'SIGTERM')).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('replicas spending one wallet (binary, postgres)', () => {
  for (const [replicas, env, how] of [
    [2, {}, ''],
    [3, {}, ''],
    [2, { USAGE_JOURNAL: 'on' }, ' with the usage journal'],
  ] as const) {
    test(`${replicas} replicas${how}: the wallet goes below zero by at most one request's cost, and only once nothing positive is left`, async () => {
      const start = 200_000n;
      const { userId, key } = await fundedKey(start);
      const nodes = await Promise.all(Array.from({ length: replicas }, () => serve(env)));
      up.set({ chunkDelayMs: 2 });
      const statuses = await Promise.all(Array.from({ length: 60 }, (_, i) => request(nodes[i % replicas]!.url, key, `rep${replicas}-${i}`, i % 2 === 1)));
      for (const cpd of nodes) expect(await stop(cpd, 'SIGTERM')).toBe(0);
      const served = statuses.filter((s) => s === 200).length;
      expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([]);
      const balance = await balanceOf(userId);
      expect(balance).toBe(start - BigInt(served) * REQUEST_COST);
      expect(balance).toBeLessThanOrEqual(0n);
      expect(balance).toBeGreaterThan(-REQUEST_COST);
      expect((await billedIds(userId)).size).toBe(served);
      const [grants] = await db.database.query<{ n: number }>(sql`select count(*)::int as n from wallet_grants where user_id = ${userId}`);
      expect(grants!.n).toBe(0);
      await expectBooksBalanced();
      up.reset();
    }, 120_000);
  }

  test("a killed replica's grant expires: another replica then spends the whole wallet", async () => {
    const start = 200_000n;
    const { userId, key } = await fundedKey(start);
    const [a, b] = await Promise.all([serve({ WALLET_GRANT_TTL: '2s' }), serve({ WALLET_GRANT_TTL: '2s' })]);
    expect(await request(a.url, key, 'dead-0', false)).toBe(200);
    // Killed while it holds a grant (an idle grant is given back only after a second).
    await stop(a, 'SIGKILL');
    const [held] = await db.database.query<{ amount: string }>(sql`select amount_micros::text as amount from wallet_grants where user_id = ${userId}`);
    expect(BigInt(held!.amount)).toBeGreaterThan(0n);
    const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) => request(b.url, key, `dead-${i + 1}`, false)));
    expect(await stop(b, 'SIGTERM')).toBe(0);
    const served = statuses.filter((s) => s === 200).length + 1;
    expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([]);
    const balance = await balanceOf(userId);
    expect(balance).toBe(start - BigInt(served) * REQUEST_COST);
    expect(balance).toBeLessThanOrEqual(0n);
    expect(balance).toBeGreaterThan(-REQUEST_COST);
    await expectBooksBalanced();
  }, 120_000);
});

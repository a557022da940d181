/**
 * Wallets spent through `dist/cpd` processes on one PostgreSQL database, for the metering tests:
 * model `m1` at 1000 per million tokens (one token costs 1000 micro-units) served by one fake
 * upstream, funded users with API keys (optionally with limits), and requests as a client sends
 * them (JSON, or a stream read to its end). The books are read from the database.
 *
 *   const bed = await startWalletBed({ replicas: 2 });
 *   const { userId, key } = await bed.fundedKey(10_000_000n);
 *   const r = await bed.chat(bed.nodes[0]!, key, { model: 'm1', messages: [...], stream: true });
 *   expect(await bed.balanceOf(userId)).toBe(...);
 *   await bed.close();
 */
import { expect } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createParser } from 'eventsource-parser';
import { buildApp } from '../../src/app';
import type { KeyLimitsInput } from '../../src/modules/metering';
import { createTestContext } from './app';
import { ensureBuilt, type RunningBinary, startBinary } from './binary';
import { createTestDatabase, type TestDatabase } from './db';
import { type FakeUpstream, startFakeUpstream } from './fake-upstream';

/** The price of m1: 1000 per million tokens, so a token costs 1000 micro-units. */
export const MICROS_PER_TOKEN = 1000n;

export interface Answer {
  status: number;
  headers: Headers;
  /** The JSON body, or for a stream its chunks (parsed `data:` events before `[DONE]`). */
  body: any;
  chunks: any[];
  /** A stream ended with `data: [DONE]`. */
  done: boolean;
  /** The usage the answer carried (a stream's last chunk's). */
  usage: any;
}

export interface WalletBed {
  db: TestDatabase;
  up: FakeUpstream;
  nodes: RunningBinary[];
  fundedKey(balanceMicros: bigint, limits?: KeyLimitsInput): Promise<{ userId: string; keyId: string; key: string }>;
  /** POST `path` (default the chat completions) with `key`; a stream is read to its end. */
  chat(node: RunningBinary, key: string, body: unknown, path?: string): Promise<Answer>;
  balanceOf(userId: string): Promise<bigint>;
  /** What the key's usage rows cost in all. */
  spentBy(keyId: string): Promise<bigint>;
  /** Every balance equals its ledger; every billed usage row has its ledger entry. */
  expectBooksBalanced(): Promise<void>;
  close(): Promise<void>;
}

export async function startWalletBed(opts: { replicas: number; env?: Record<string, string> }): Promise<WalletBed> {
  await ensureBuilt();
  const db = await createTestDatabase('postgres');
  const up = await startFakeUpstream({ models: ['m1'] });
  const env = { DATABASE_URL: db.url!, MODEL_BACKENDS: `m1=${up.url}`, RATE_LIMITS: 'gateway=100000/1m', ...opts.env };
  let nodes: RunningBinary[] = [];
  try {
    // The schema first (one process migrates), then the others.
    nodes.push(await startBinary({ env }));
    nodes.push(...(await Promise.all(Array.from({ length: opts.replicas - 1 }, () => startBinary({ env })))));
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop('SIGKILL')));
    await up.close();
    await db.drop();
    throw err;
  }

  async function fundedKey(balanceMicros: bigint, limits: KeyLimitsInput = {}) {
    const tc = await createTestContext('postgres', {}, { testDb: db });
    try {
      const { services } = await buildApp(tc.ctx);
      await services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
      const user = await services.accounts.createUser({ email: `u${crypto.randomUUID().slice(0, 8)}@example.com`, password: 'binary-password' });
      const key = await services.accounts.createApiKey(user.id, { name: 'metering', ...limits });
      await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: balanceMicros, reference: `funds-${user.id}`, description: 'funds' });
      return { userId: user.id, keyId: key.id, key: key.key };
    } finally {
      await tc.close();
    }
  }

  async function chat(node: RunningBinary, key: string, body: unknown, path = '/v1/chat/completions'): Promise<Answer> {
    const res = await fetch(`${node.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      const parsed = JSON.parse(text);
      return { status: res.status, headers: res.headers, body: parsed, chunks: [], done: false, usage: parsed?.usage ?? parsed?.response?.usage };
    }
    const chunks: any[] = [];
    let done = false;
    const parser = createParser({
      onEvent: (e) => {
        if (e.data === '[DONE]') done = true;
        else chunks.push(JSON.parse(e.data));
      },
    });
    parser.feed(text);
    const usage = chunks.findLast((c) => c.usage)?.usage ?? chunks.findLast((c) => c.response?.usage)?.response.usage;
    return { status: res.status, headers: res.headers, body: null, chunks, done, usage };
  }

  const balanceOf = async (userId: string) =>
    BigInt((await db.database.query<{ b: string }>(sql`select balance_micros::text as b from wallets where user_id = ${userId}`))[0]!.b);

  const spentBy = async (keyId: string) =>
    BigInt((await db.database.query<{ s: string }>(sql`select coalesce(sum(cost_micros), 0)::text as s from router_usage where key_id = ${keyId}`))[0]!.s);

  async function expectBooksBalanced() {
    const mismatched = await db.database.query(sql`
      select w.user_id from wallets w left join (select user_id, sum(amount_micros) as s from wallet_transactions group by user_id) t using (user_id)
      where w.balance_micros <> coalesce(t.s, 0)`);
    expect(mismatched).toEqual([]);
    const unbilled = await db.database.query(sql`
      select u.id from router_usage u left join wallet_transactions t on t.reference = 'usage:' || u.id
      where u.user_id is not null and u.cost_micros > 0 and t.id is null`);
    expect(unbilled).toEqual([]);
  }

  return {
    db,
    up,
    nodes,
    fundedKey,
    chat,
    balanceOf,
    spentBy,
    expectBooksBalanced,
    async close() {
      await Promise.all(nodes.map((n) => n.stop('SIGKILL')));
      nodes = [];
      await up.close();
      await db.drop();
    },
  };
}

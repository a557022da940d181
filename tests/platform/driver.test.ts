/**
 * The PostgreSQL driver's round trips (patches/postgres@3.4.9.patch): postgres.js described every
 * unprepared statement with parameters before running it, a round trip of its own that only told
 * it how to serialize values of an unknown type. Statements whose parameters are all text,
 * numbers, booleans or null now go in one round trip; others are still described first.
 * Counted at a TCP proxy: each round trip is one chunk sent by the client.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createConnection, type Socket } from 'node:net';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import type { Database } from '../../src/platform/db';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { createProxiedTestDatabase, type TcpProxy } from '../support/tcp-proxy';

describe('driver round trips (postgres)', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let database: Database;
  beforeAll(async () => {
    const made = await createProxiedTestDatabase(1);
    ({ direct: t, proxy } = made);
    database = made.proxied.database;
    await database.query(sql`select 1`); // the connection's start-up is not counted
  });
  afterAll(async () => {
    await database.close();
    await proxy.close();
    await t.drop();
  });

  /** Client chunks (round trips) one query takes, and its rows. */
  async function roundTrips<T>(run: () => Promise<T>): Promise<{ trips: number; rows: T }> {
    const before = proxy.clientChunks;
    const rows = await run();
    return { trips: proxy.clientChunks - before, rows };
  }

  test('text, number, boolean and null parameters: one round trip, and the values arrive as sent', async () => {
    const { trips, rows } = await roundTrips(() =>
      database.query<{ t: string; n: number; b: boolean; z: string | null; j: unknown }>(
        sql`select ${"it's \\ text"}::text as t, ${42}::int as n, ${true}::boolean as b, ${null}::text as z, ${JSON.stringify({ a: [1, 'x'] })}::jsonb as j`,
      ),
    );
    expect(rows).toEqual([{ t: "it's \\ text", n: 42, b: true, z: null, j: { a: [1, 'x'] } }]);
    expect(trips).toBe(1);
  });

  test('a bytes parameter is still described first: two round trips', async () => {
    const { trips, rows } = await roundTrips(() => database.query<{ n: number }>(sql`select length(${new Uint8Array([1, 2, 3])}::bytea) as n`));
    expect(rows).toEqual([{ n: 3 }]);
    expect(trips).toBe(2);
  });
});

/**
 * A connection whose socket closes while a write is waiting for its setImmediate (a reset, a cut)
 * must be able to connect again. postgres.js 3.4.9 cancelled that immediate on close without
 * forgetting it, so the next connection of that pool slot queued its startup message behind a
 * timer that would never run: every connect of the slot waited for connect_timeout, for the life
 * of the process (seen as 503s for 5 s at a time on a replica after the database came back).
 * The socket is this test's own (the driver's `socket` option), so it can be closed in the same
 * tick as a query is written, before the write's immediate runs.
 */
describe('driver reconnect after a close with a write pending (postgres)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await t.drop();
  });

  test('the next connection of the slot writes its startup message and serves', async () => {
    const url = new URL(t.url!);
    const sockets: Socket[] = [];
    // `socket` is a documented option of the driver that its types leave out.
    const options = {
      max: 1,
      connect_timeout: 2,
      onnotice: () => {},
      socket: () =>
        new Promise<Socket>((resolve, reject) => {
          const s = createConnection(Number(url.port || 5432), url.hostname, () => resolve(s));
          s.once('error', reject);
          sockets.push(s);
        }),
    };
    const sql = postgres(t.url!, options as postgres.Options<Record<string, never>>);
    try {
      expect([...(await sql`select 1 as n`)]).toEqual([{ n: 1 }]);
      const pending = sql`select 2 as n`.execute();
      // Closed within this tick: 'close' comes on the next tick, before the write's setImmediate.
      sockets.at(-1)!.destroy();
      await expect(pending).rejects.toThrow();
      expect([...(await sql`select 3 as n`)]).toEqual([{ n: 3 }]);
      expect(sockets).toHaveLength(2);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });
});

/**
 * The PostgreSQL driver's changes (patches/postgres@3.4.9.patch, docs/decisions/0020-postgres-js-patch.md),
 * each against a real server: without its change, each test fails. The connection ending under a
 * query and refused at its next start is database-refusal.test.ts's.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createConnection, type Socket } from 'node:net';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import type { Database } from '../../src/platform/db';
import { createTestDatabase, PG_HOST_URL, type TestDatabase } from '../support/db';
import { createProxiedTestDatabase, type TcpProxy } from '../support/tcp-proxy';

/**
 * postgres.js describes every unprepared statement with parameters before running it, a round trip
 * of its own that only tells it how to serialize values of an unknown type, and drizzle runs every
 * query it does not name unprepared. Statements whose parameters are all text, numbers, booleans or
 * null go in one round trip; others are still described first. Counted at a TCP proxy: each round
 * trip is one chunk sent by the client.
 */
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

describe('driver connections that close (postgres)', () => {
  let t: TestDatabase;
  const admin = postgres(`${PG_HOST_URL}/postgres`, { max: 1, onnotice: () => {} });
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await admin.end();
    await t.drop();
  });

  /** A one-connection client on sockets of the test's own (the driver's `socket` option), listed in `sockets`. */
  function clientOnOwnSockets(sockets: Socket[]) {
    const url = new URL(t.url!);
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
    return postgres(t.url!, options as postgres.Options<Record<string, never>>);
  }

  /**
   * A connection whose socket closes while a write is waiting for its setImmediate (a reset, a cut)
   * must be able to connect again. postgres.js 3.4.9 cancelled that immediate on close without
   * forgetting it, so the next connection of that pool slot queued its startup message behind a
   * timer that would never run: every connect of the slot waited for connect_timeout, for the life
   * of the process (seen as 503s for 5 s at a time on a replica after the database came back).
   * The socket is closed in the same tick as a query is written, before the write's immediate runs.
   */
  test('after a close with a write pending, the next connection of the slot writes its startup message and serves', async () => {
    const sockets: Socket[] = [];
    const sql = clientOnOwnSockets(sockets);
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

  /**
   * A socket can still emit 'error' after the driver let go of it (a reset seen as an uncaught
   * "read ECONNRESET" while PostgreSQL restarted). With no listener, the emit throws out of the
   * socket's own callback and ends the process.
   */
  test('an error a closed connection\'s socket emits afterwards is not thrown', async () => {
    const sockets: Socket[] = [];
    const sql = clientOnOwnSockets(sockets);
    try {
      expect([...(await sql`select 1 as n`)]).toEqual([{ n: 1 }]);
      const first = sockets[0]!;
      const closed = new Promise((resolve) => first.once('close', resolve));
      first.destroy();
      await closed;
      expect(() => first.emit('error', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).not.toThrow();
    } finally {
      await sql.end({ timeout: 1 });
    }
  });

  /**
   * A socket that fails emits 'error', then 'close' with hadError. The driver settled the queries it
   * held at the error, but one sent in between (on the same connection, still open to the pool) was
   * left waiting for ever: closed() settled queries only when the close came without an error.
   */
  test('a query sent between a socket\'s error and its close fails instead of waiting', async () => {
    const sockets: Socket[] = [];
    const sql = clientOnOwnSockets(sockets);
    try {
      expect([...(await sql`select 1 as n`)]).toEqual([{ n: 1 }]);
      const socket = sockets[0]!;
      let between: Promise<unknown> = Promise.resolve();
      // Listeners run in order: the driver's error handler first, then this one, then the close.
      socket.once('error', () => {
        between = sql`select 2 as n`.execute().then(
          () => 'served',
          (err: { code?: string }) => err.code ?? String(err),
        );
      });
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.destroy(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
      await closed;
      expect(await between).toBe('CONNECTION_CLOSED');
      expect([...(await sql`select 3 as n`)]).toEqual([{ n: 3 }]);
    } finally {
      await sql.end({ timeout: 1 });
    }
  }, 10_000);

  /**
   * A reserved connection is pinned: after its backend is terminated it has no socket until it
   * reconnects, and a query sent on it then went to a null socket from a setImmediate, an uncaught
   * TypeError that ended the process (porsager/postgres issue 1208, open in 3.4.9). It must fail
   * as a closed connection instead.
   */
  test('a query on a reserved connection whose backend was terminated fails as CONNECTION_CLOSED', async () => {
    let markClosed: () => void = () => {};
    const connectionClosed = new Promise<void>((resolve) => (markClosed = resolve));
    const sql = postgres(t.url!, { max: 2, onnotice: () => {}, connect_timeout: 2, onclose: () => markClosed() });
    const reserved = await sql.reserve();
    try {
      const [row] = await reserved<Array<{ pid: number }>>`select pg_backend_pid() as pid`;
      await admin`select pg_terminate_backend(${row!.pid})`;
      const codeOf = (q: Promise<unknown>) => q.then(
        () => 'served',
        (err: { code?: string }) => err.code ?? String(err),
      );
      // The first query finds the connection ended by the server: its FATAL 57P01, the reset or the close.
      expect(['57P01', 'ECONNRESET', 'CONNECTION_CLOSED']).toContain(await codeOf(reserved`select 1`));
      // Sent once the driver has dropped the socket (its onclose), not between the reset and the close.
      await connectionClosed;
      expect(await codeOf(reserved`select 2`)).toBe('CONNECTION_CLOSED');
    } finally {
      reserved.release();
      await sql.end({ timeout: 1 });
    }
  }, 10_000);
});

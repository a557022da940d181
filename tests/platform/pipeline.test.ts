/**
 * platform/db's pipelined transactions (one round trip on PostgreSQL: BEGIN, statements, COMMIT
 * written together): all or nothing, the cause of a failure rather than "transaction aborted",
 * and the batch writer's split and retries on top of them, on a real database and through a TCP
 * proxy that cuts the connection or loses the COMMIT's acknowledgement.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { type Database, type DbOrTx, createBatchWriter, isTransient, openDatabase } from '../../src/platform/db';
import { captureLogger } from '../support/log-sink';
import { DB_KINDS, type TestDatabase, createTestDatabase } from '../support/db';
import { createProxiedTestDatabase, startPostgresProxy, type TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait';

interface Row {
  id: string;
  n: number;
}

const INSERT = `insert into pl_rows (id, n) select id, n from jsonb_to_recordset($1::jsonb) as x(id text, n integer) on conflict (id) do nothing returning id`;
const COUNT = `update pl_counts set hits = hits + $2::int where name = $1 returning hits`;

/** The usage writer's shape: rows inserted, then a counter row moved by how many were inserted. */
function writeRows(database: Database, rows: Row[]) {
  return database.pipelined(async (on: DbOrTx) => {
    const [inserted, counted] = await Promise.all([
      database.prepared<{ id: string }>(INSERT, [JSON.stringify(rows)], on),
      database.prepared<{ hits: number }>(COUNT, ['rows', String(rows.length)], on),
    ]);
    return { inserted: inserted.length, hits: counted[0]!.hits };
  });
}

const rowsIn = async (database: Database, prefix: string) =>
  (await database.query<{ n: number }>(sql`select count(*)::int as n from pl_rows where id like ${`${prefix}%`}`))[0]!.n;
const hits = async (database: Database) => (await database.query<{ hits: number }>(sql`select hits from pl_counts where name = 'rows'`))[0]!.hits;

async function setUp(database: Database) {
  await database.query(sql`create table pl_rows (id text primary key, n integer not null)`);
  await database.query(sql`create table pl_counts (name text primary key, hits integer not null)`);
  await database.query(sql`insert into pl_counts values ('rows', 0)`);
}

for (const kind of DB_KINDS) {
  describe(`pipelined transaction (${kind})`, () => {
    let t: TestDatabase;
    beforeAll(async () => {
      t = await createTestDatabase(kind);
      await setUp(t.database);
    });
    afterAll(() => t.drop());

    test('commits every statement and answers each its rows', async () => {
      const before = await hits(t.database);
      const out = await writeRows(t.database, [
        { id: 'c-1', n: 1 },
        { id: 'c-2', n: 2 },
      ]);
      expect(out).toEqual({ inserted: 2, hits: before + 2 });
      expect(await rowsIn(t.database, 'c-')).toBe(2);
      expect(await hits(t.database)).toBe(before + 2);
    });

    test('an error in the first statement writes nothing (the later statement ran in the aborted transaction) and is told by its cause', async () => {
      const before = await hits(t.database);
      const err = await writeRows(t.database, [
        { id: 'e-1', n: 1 },
        { id: 'e-2', n: 3_000_000_000 },
      ]).catch((e: unknown) => e);
      expect(String((err as Error).message)).toMatch(/out of range/);
      expect((err as { code?: string }).code).toBe('22003');
      expect(isTransient(err)).toBe(false);
      expect(await rowsIn(t.database, 'e-')).toBe(0);
      expect(await hits(t.database)).toBe(before);
      // The connection is back out of the failed transaction: the next one commits.
      expect((await writeRows(t.database, [{ id: 'e-3', n: 3 }])).inserted).toBe(1);
    });

    test('an error in the last statement rolls back the statements before it', async () => {
      const err = await t.database
        .pipelined(async (on) => {
          await Promise.all([
            t.database.prepared(INSERT, [JSON.stringify([{ id: 'l-1', n: 1 }])], on),
            t.database.prepared(`insert into pl_counts (name, hits) values ($1, $2::int)`, ['rows', '1'], on),
          ]);
        })
        .catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe('23505');
      expect(await rowsIn(t.database, 'l-')).toBe(0);
    });

    test('through the batch writer: a row at fault is set aside, every other row written once, the counter moved once per row', async () => {
      const { log } = captureLogger();
      const setAside: string[] = [];
      const before = await hits(t.database);
      const writer = createBatchWriter<Row>({
        name: 'pipelined rows',
        log,
        concurrency: 1,
        write: async (rows) => void (await writeRows(t.database, rows)),
        setAside: async (row) => void setAside.push(row.id),
      });
      const rows = Array.from({ length: 40 }, (_, i) => ({ id: `s-${String(i).padStart(2, '0')}`, n: i === 23 ? -3_000_000_000 : i }));
      const outcomes = await Promise.all(rows.map((r) => writer.add(r)));
      expect(outcomes.filter((o) => o === 'written')).toHaveLength(39);
      expect(outcomes[23]).toBe('set_aside');
      expect(setAside).toEqual(['s-23']);
      expect(await rowsIn(t.database, 's-')).toBe(39);
      expect(await hits(t.database)).toBe(before + 39);
    });
  });
}

describe('pipelined transaction through a TCP proxy (postgres)', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let viaProxy: Database;
  beforeAll(async () => {
    const made = await createProxiedTestDatabase(2);
    ({ direct: t, proxy } = made);
    viaProxy = made.proxied.database;
    await setUp(t.database);
  });
  afterAll(async () => {
    proxy.restore();
    await viaProxy.close().catch(() => {});
    await proxy.close();
    await t.drop();
  });

  test('a lost COMMIT acknowledgement is a transient failure; the replay writes nothing twice and the next transactions run', async () => {
    await writeRows(viaProxy, [{ id: 'w-0', n: 0 }]); // the statements are known on the connection
    const before = await hits(t.database);
    proxy.loseNextCommitAck();
    const err = await writeRows(viaProxy, [{ id: 'a-1', n: 1 }]).catch((e: unknown) => e);
    expect(proxy.lostAcks).toBe(1);
    expect(isTransient(err)).toBe(true);
    // It did commit: the replay inserts nothing (its counter step still runs, as the usage writer's grants step does).
    expect(await rowsIn(t.database, 'a-')).toBe(1);
    expect((await writeRows(viaProxy, [{ id: 'a-1', n: 1 }])).inserted).toBe(0);
    expect(await hits(t.database)).toBe(before + 2);
  });

  test('a cut connection fails the transaction as transient, writes nothing, and the pipeline reconnects', async () => {
    proxy.cut();
    const err = await writeRows(viaProxy, [{ id: 'x-1', n: 1 }]).catch((e: unknown) => e);
    expect(isTransient(err)).toBe(true);
    expect(await rowsIn(t.database, 'x-')).toBe(0);
    proxy.restore();
    expect((await writeRows(viaProxy, [{ id: 'x-2', n: 2 }])).inserted).toBe(1);
  });

  test('a statement issued after the transaction was sent is refused', async () => {
    const err = await viaProxy
      .pipelined(async (on) => {
        await viaProxy.prepared(INSERT, [JSON.stringify([{ id: 'late-1', n: 1 }])], on);
        await viaProxy.prepared(INSERT, [JSON.stringify([{ id: 'late-2', n: 2 }])], on);
      })
      .catch((e: unknown) => e);
    expect(String((err as Error).message)).toMatch(/issued after the transaction was sent/);
    expect(await rowsIn(t.database, 'late-2')).toBe(0);
  });

  test('a statement whose cached plan a schema change invalidated: nothing is written outside the transaction and a retry commits', async () => {
    const returning = `insert into pl_rows (id, n) values ($1, $2::int) returning *`;
    const write = (id: string) => viaProxy.pipelined((on) => viaProxy.prepared(returning, [id, '1'], on));
    await write('v-1');
    await t.database.query(sql`alter table pl_rows add column note text`);
    // postgres.js re-sends the statement on its own, after COMMIT: that copy must not write.
    const err = await write('v-2').catch((e: unknown) => e);
    expect(isTransient(err)).toBe(true);
    expect(await rowsIn(t.database, 'v-')).toBe(1);
    await write('v-2');
    expect(await rowsIn(t.database, 'v-')).toBe(2);
  });
});

describe('pipelined transaction: one round trip (postgres)', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let via: Database;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
    await setUp(t.database);
    // Answers held back while what the client sends still passes: a client that waits for an
    // answer before sending more (BEGIN, then the statements, then COMMIT) sends nothing further.
    const started = await startPostgresProxy(t.url!);
    proxy = started.proxy;
    via = await openDatabase({ databaseUrl: started.url, maxConnections: 2 });
  });
  afterAll(async () => {
    proxy.restore();
    await via.close().catch(() => {});
    await proxy.close();
    await t.drop();
  });

  test('BEGIN, the statements and COMMIT all reach the server while none of its answers has been read', async () => {
    await writeRows(via, [{ id: 'r-0', n: 0 }]); // the statements are described on the connection
    proxy.holdAnswers();
    const writing = writeRows(via, [{ id: 'r-1', n: 1 }]);
    await waitFor(() => proxy.sentWhileHeld().includes('commit'), 'COMMIT sent with no answer read', { timeoutMs: 3_000 });
    expect(proxy.sentWhileHeld()).toContain('begin read write');
    expect(proxy.sentWhileHeld()).toContain('"r-1"');
    proxy.restore();
    expect((await writing).inserted).toBe(1);
    expect(await rowsIn(t.database, 'r-')).toBe(2);
  });
});

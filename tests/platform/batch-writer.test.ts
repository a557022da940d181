/** platform/db's group-commit batch writer on a real database: batching, rows at fault, outages, lost acknowledgements, shutdown. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { heapStats } from 'bun:jsc';
import { sql } from 'drizzle-orm';
import { type Database, createBatchWriter } from '../../src/platform/db';
import { captureLogger } from '../support/log-sink';
import { DB_KINDS, type TestDatabase, createTestDatabase } from '../support/db';
import { createProxiedTestDatabase, type TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait';

interface Row {
  id: string;
  n: number;
}

function writerOn(
  database: Database,
  opts: { concurrency?: number; lingerMs?: number; beforeWrite?: (rows: Row[]) => void; setAside?: 'records' | 'fails' | 'none' } = {},
) {
  const { log, lines } = captureLogger();
  const setAside: Array<{ row: Row; reason: string }> = [];
  let writes = 0;
  const replays: boolean[] = [];
  const writer = createBatchWriter<Row>({
    name: 'test rows',
    log,
    concurrency: opts.concurrency,
    lingerMs: opts.lingerMs,
    async write(rows, replay) {
      writes++;
      replays.push(replay);
      opts.beforeWrite?.(rows);
      // A first try inserts plainly, as the product's writers do; a replay skips ids already stored.
      const onConflict = sql.raw(replay ? 'on conflict (id) do nothing' : '');
      await database.db.transaction(async (tx) => {
        await database.query(
          sql`insert into bw_rows (id, n) select id, n from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as x(id text, n integer) ${onConflict}`,
          tx,
        );
      });
    },
    ...(opts.setAside === 'none'
      ? {}
      : {
          async setAside(row: Row, reason: string) {
            if (opts.setAside === 'fails') throw new Error('the dead-letter table is gone');
            setAside.push({ row, reason });
          },
        }),
  });
  return { writer, lines, setAside, writes: () => writes, replays };
}

const rowsIn = async (database: Database, prefix: string) =>
  (await database.query<{ id: string; n: number }>(sql`select id, n from bw_rows where id like ${`${prefix}%`} order by id`)).length;

for (const kind of DB_KINDS) {
  describe(`batch writer (${kind})`, () => {
    let t: TestDatabase;
    beforeAll(async () => {
      t = await createTestDatabase(kind);
      await t.database.query(sql`create table bw_rows (id text primary key, n integer not null)`);
    });
    afterAll(() => t.drop());

    test('rows added together are written in few transactions, each add resolving once its row is committed', async () => {
      const { writer, writes } = writerOn(t.database);
      const outcomes = await Promise.all(Array.from({ length: 100 }, (_, i) => writer.add({ id: `g-${String(i).padStart(3, '0')}`, n: i })));
      expect(outcomes.every((o) => o === 'written')).toBe(true);
      expect(await rowsIn(t.database, 'g-')).toBe(100);
      expect(writes()).toBeLessThan(10);
    });

    test('with a linger, rows added one at a time to an idle writer share one batch', async () => {
      const { writer, writes } = writerOn(t.database, { lingerMs: 200 });
      const outcomes: Array<Promise<string>> = [];
      // One row per event-loop turn: without the linger, the first would start a batch on its own.
      for (let i = 0; i < 5; i++) {
        outcomes.push(writer.add({ id: `l-${i}`, n: i }));
        await new Promise((r) => setImmediate(r));
      }
      expect(writes()).toBe(0);
      expect(await Promise.all(outcomes)).toEqual(Array(5).fill('written'));
      expect(writes()).toBe(1);
      expect(await rowsIn(t.database, 'l-')).toBe(5);
    });

    test('with a linger, rows that arrive while a batch is written wait to share the next one', async () => {
      const batches: string[][] = [];
      const { writer } = writerOn(t.database, {
        concurrency: 1,
        lingerMs: 200,
        beforeWrite(rows) {
          batches.push(rows.map((r) => r.id));
          // A row arriving while the first batch is written; the next arrives once it has committed.
          if (rows[0]!.id === 'n-0') void writer.add({ id: 'n-1', n: 1 });
        },
      });
      expect(await writer.add({ id: 'n-0', n: 0 })).toBe('written');
      await new Promise((r) => setImmediate(r));
      expect(await writer.add({ id: 'n-2', n: 2 })).toBe('written');
      // Without the linger between batches, n-1 went alone as soon as n-0 committed.
      expect(batches).toEqual([['n-0'], ['n-1', 'n-2']]);
      expect(await rowsIn(t.database, 'n-')).toBe(3);
    });

    test('flush() and close() cut a linger short', async () => {
      // A linger longer than the test's timeout: only flush() can end it in time.
      const { writer, writes } = writerOn(t.database, { lingerMs: 600_000 });
      const outcome = writer.add({ id: 'f-0', n: 0 });
      await new Promise((r) => setImmediate(r));
      expect(writes()).toBe(0);
      await writer.flush();
      expect(await outcome).toBe('written');
      const closing = writer.add({ id: 'f-1', n: 1 });
      await writer.close(5_000);
      expect(await closing).toBe('written');
      expect(await rowsIn(t.database, 'f-')).toBe(2);
    });

    test("a first try meeting a row already stored (a dead process's journal, say) is sent again at once as a replay: every row written once", async () => {
      await t.database.query(sql`insert into bw_rows (id, n) values ('d-1', 1)`);
      const { writer, replays, lines, setAside } = writerOn(t.database, { concurrency: 1, lingerMs: 50 }); // one batch of both
      const outcomes = await Promise.all([writer.add({ id: 'd-1', n: 1 }), writer.add({ id: 'd-2', n: 2 })]);
      expect(outcomes).toEqual(['written', 'written']);
      expect(replays).toEqual([false, true]);
      expect(await rowsIn(t.database, 'd-')).toBe(2);
      expect(setAside).toEqual([]);
      expect(lines.filter((l) => JSON.parse(l).level >= 40)).toEqual([]);
    });

    test('a row the column cannot hold is set aside with the reason; every other row of its batch is written', async () => {
      const { writer, setAside, lines } = writerOn(t.database, { concurrency: 1 });
      const rows = Array.from({ length: 40 }, (_, i) => ({ id: `p-${String(i).padStart(2, '0')}`, n: i === 17 ? 3_000_000_000 : i }));
      const outcomes = await Promise.all(rows.map((r) => writer.add(r)));
      expect(outcomes.filter((o) => o === 'set_aside')).toHaveLength(1);
      expect(outcomes[17]).toBe('set_aside');
      expect(await rowsIn(t.database, 'p-')).toBe(39);
      expect(setAside).toHaveLength(1);
      expect(setAside[0]!.row.id).toBe('p-17');
      expect(setAside[0]!.reason).toMatch(/out of range/);
      expect(writer.setAside).toBe(1);
      expect(lines.some((l) => l.includes('row set aside') && l.includes('p-17'))).toBe(true);
    });

    for (const how of ['fails', 'none'] as const) {
      test(`a row at fault that cannot be set aside (${how === 'none' ? 'no setAside' : 'setAside fails'}) is answered 'unwritten'; the others are written`, async () => {
        const { writer, lines } = writerOn(t.database, { concurrency: 1, setAside: how });
        const rows = Array.from({ length: 10 }, (_, i) => ({ id: `u${how}-${i}`, n: i === 4 ? 3_000_000_000 : i }));
        const outcomes = await Promise.all(rows.map((r) => writer.add(r)));
        expect(outcomes).toEqual(rows.map((_, i) => (i === 4 ? 'unwritten' : 'written')));
        expect(await rowsIn(t.database, `u${how}-`)).toBe(9);
        expect(writer.setAside).toBe(0);
        // The row is logged whole once; a failed set-aside says so on a line of its own.
        const said = how === 'none' ? 'test rows: row not written' : 'test rows: row set aside';
        expect(lines.filter((l) => l.includes(said) && l.includes(`u${how}-4`))).toHaveLength(1);
        expect(lines.filter((l) => l.includes('test rows: could not record a row set aside'))).toHaveLength(how === 'fails' ? 1 : 0);
      });
    }

    test('a batch leaves nothing behind once written: 1000 batches one after another keep no promise alive', async () => {
      const { writer } = writerOn(t.database);
      const promises = () => {
        Bun.gc(true);
        return heapStats().objectTypeCounts.Promise ?? 0;
      };
      await writer.add({ id: 'leak-warm', n: 0 });
      const before = promises();
      for (let i = 0; i < 1000; i++) expect(await writer.add({ id: `leak-${i}`, n: i })).toBe('written');
      // Racing each write against one promise that lives until close() kept one per batch (+1000).
      expect(promises() - before).toBeLessThan(100);
      expect(await rowsIn(t.database, 'leak-')).toBe(1001);
    });
  });
}

describe('batch writer through a TCP proxy (postgres)', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let viaProxy: Database;
  beforeAll(async () => {
    const made = await createProxiedTestDatabase(4);
    ({ direct: t, proxy } = made);
    viaProxy = made.proxied.database;
    await t.database.query(sql`create table bw_rows (id text primary key, n integer not null)`);
  });
  // Closing the pool waits (up to its 5 s) for the write the last test gave up on, still pending in the driver.
  afterAll(async () => {
    await viaProxy.close().catch(() => {});
    await proxy.close();
    await t.drop();
  }, 15_000);

  test('a commit whose acknowledgement is lost is replayed and writes nothing twice', async () => {
    const { writer, writes } = writerOn(viaProxy, { concurrency: 1 });
    proxy.loseNextCommitAck();
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => writer.add({ id: `a-${String(i).padStart(2, '0')}`, n: i })));
    expect(outcomes.every((o) => o === 'written')).toBe(true);
    expect(proxy.lostAcks).toBe(1);
    expect(writes()).toBeGreaterThan(1);
    expect(await rowsIn(t.database, 'a-')).toBe(20);
  });

  test('while the database is unreachable rows wait, then are all written once it is back', async () => {
    const { writer, lines } = writerOn(viaProxy);
    proxy.cut();
    const adding = Promise.all(Array.from({ length: 30 }, (_, i) => writer.add({ id: `o-${String(i).padStart(2, '0')}`, n: i })));
    await waitFor(() => lines.some((l) => l.includes('database unavailable; retrying')), 'a retry');
    expect(await rowsIn(t.database, 'o-')).toBe(0);
    proxy.restore();
    expect((await adding).every((o) => o === 'written')).toBe(true);
    expect(await rowsIn(t.database, 'o-')).toBe(30);
  });

  test('close() gives up on an unreachable database after its deadline, logging each row not written', async () => {
    const { writer, lines } = writerOn(viaProxy);
    proxy.cut();
    const adding = Promise.all(Array.from({ length: 5 }, (_, i) => writer.add({ id: `c-${i}`, n: i })));
    await writer.close(300);
    expect(await adding).toEqual(['unwritten', 'unwritten', 'unwritten', 'unwritten', 'unwritten']);
    expect(lines.filter((l) => l.includes('row not written before shutdown'))).toHaveLength(5);
    proxy.restore();
  });
});

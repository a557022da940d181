/**
 * platform/db's journal ahead of the database, shipping through the real batch writer into a real
 * database: rows appended survive the process, files are deleted once written, files of processes
 * that are gone are adopted (files still locked by a live process are not), rows given up at
 * shutdown stay for the next process, and a torn line does not stop the rest.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { type RowOutcome, createBatchWriter, openJournal } from '../../src/platform/db';
import { tryLockExclusive } from '../../src/platform/flock';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { captureLogger } from '../support/log-sink';
import { waitFor } from '../support/wait';

interface Row {
  id: string;
  n: number;
}

let t: TestDatabase;
let root: string;
beforeAll(async () => {
  t = await createTestDatabase('postgres');
  await t.database.query(sql`create table j_rows (id text primary key, n integer not null)`);
  root = mkdtempSync(join(tmpdir(), 'cpd-journal-'));
});
afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  await t.drop();
});

const ids = async (prefix: string) =>
  (await t.database.query<{ id: string }>(sql`select id from j_rows where id like ${`${prefix}%`} order by id`)).map((r) => r.id);
const files = (dir: string) => readdirSync(dir).filter((n) => n.endsWith('.jsonl'));
/** This process's descriptors open on files in `dir` (a file is closed only after its fdatasync in flight). */
const openIn = (dir: string) =>
  readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith(`${dir}/`);
    } catch {
      return false; // the descriptor readdir itself used, closed since
    }
  });

/** A journal file as a process that is gone left it (no lock held); answers its path. */
function leftBehind(dir: string, name: string, text: string): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** A journal in `dir` shipping through a batch writer into j_rows; `ship` may override the outcome. */
function journalIn(dir: string, opts: { ship?: (row: Row, write: () => Promise<RowOutcome>) => Promise<RowOutcome>; sweepEveryMs?: number; maxFileRows?: number } = {}) {
  const { log, lines } = captureLogger();
  const writer = createBatchWriter<Row>({
    name: 'rows',
    log,
    async write(rows) {
      await t.database.query(sql`insert into j_rows (id, n) select id, n from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as x(id text, n integer) on conflict (id) do nothing`);
    },
    async setAside() {},
  });
  const journal = openJournal<Row>({
    dir,
    name: 'rows',
    log,
    encode: (r) => JSON.stringify(r),
    decode: (v) => v as Row,
    ship: (r) => (opts.ship ? opts.ship(r, () => writer.add(r)) : writer.add(r)),
    maxFileAgeMs: 20,
    maxFileRows: opts.maxFileRows,
    syncEveryMs: 10,
    sweepEveryMs: opts.sweepEveryMs,
  });
  return { journal, writer, lines };
}

describe('journal ahead of the database (postgres)', () => {
  test('a row is on disk when append returns; once written and its file sealed, the file is deleted', async () => {
    const dir = join(root, 'append');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const { journal } = journalIn(dir, { ship: async (_, write) => {
      await held;
      return write();
    } });
    const shipped = journal.append({ id: 'a-1', n: 1 });
    const [name] = files(dir);
    expect(readFileSync(join(dir, name!), 'utf8')).toBe('{"id":"a-1","n":1}\n');
    expect(journal.unshipped).toBe(1);
    release();
    expect(await shipped).toBe('written');
    expect(await ids('a-')).toEqual(['a-1']);
    expect(journal.unshipped).toBe(0);
    await waitFor(() => files(dir).length === 0, 'the written file to be deleted');
    journal.close();
  });

  test('a line with characters outside ASCII is appended whole (its bytes, not its UTF-16 length, are checked) and shipped', async () => {
    const dir = join(root, 'utf8');
    const { journal } = journalIn(dir);
    const id = 'u-é✓😀';
    const shipped = journal.append({ id, n: 7 });
    const [name] = files(dir);
    expect(readFileSync(join(dir, name!))).toEqual(Buffer.from(`{"id":"${id}","n":7}\n`));
    expect(await shipped).toBe('written');
    expect(await ids('u-')).toEqual([id]);
    journal.close();
  });

  test('while rows wait for the database, files roll over by rows only (bounded), then are all deleted once written', async () => {
    const dir = join(root, 'rollover');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const { journal } = journalIn(dir, {
      maxFileRows: 3,
      ship: async (_, write) => {
        await held;
        return write();
      },
    });
    const shipped = Array.from({ length: 10 }, (_, i) => journal.append({ id: `r-${i}`, n: i }));
    expect(files(dir)).toHaveLength(4);
    // A later sweep (the one below, from a second journal on the directory) proves time passed; still four files.
    const other = journalIn(dir, { sweepEveryMs: 20 });
    leftBehind(dir, '1700000000004-00000000000000aa.jsonl', '{"id":"r-gone","n":0}\n');
    await waitFor(async () => (await ids('r-gone')).length === 1, 'a sweep of the other journal');
    // The last file is older than maxFileAgeMs, but holds rows not yet written: the next row goes into it.
    shipped.push(journal.append({ id: 'r-10', n: 10 }));
    expect(files(dir)).toHaveLength(4);
    release();
    expect(await Promise.all(shipped)).toEqual(Array(11).fill('written'));
    await waitFor(() => files(dir).length === 0, 'every written file to be deleted');
    expect(await ids('r-')).toHaveLength(12);
    await waitFor(() => openIn(dir).length === 0, "the deleted files' descriptors to be closed");
    journal.close();
    other.journal.close();
  });

  test('a full file is flushed on the thread pool when sealed; written meanwhile, it is deleted and its descriptor closed once the flush is done', async () => {
    const dir = join(root, 'flush');
    // Rows written at once: their outcomes arrive (microtasks) before the flush started by the seal calls back.
    const { journal } = journalIn(dir, { maxFileRows: 3, ship: async () => 'written' });
    const shipped = Array.from({ length: 4 }, (_, i) => journal.append({ id: `f-${i}`, n: i }));
    expect(await Promise.all(shipped)).toEqual(Array(4).fill('written'));
    await waitFor(() => files(dir).length <= 1 && openIn(dir).length <= 1, 'the sealed file deleted and closed');
    journal.close();
    await waitFor(() => openIn(dir).length === 0, 'every descriptor closed');
    expect(files(dir)).toEqual([]);
  });

  test("a file left by a process that is gone is adopted: its rows are written (again: nothing twice) and the file deleted", async () => {
    const dir = join(root, 'adopt');
    const first = journalIn(dir);
    await first.journal.append({ id: 'b-0', n: 0 });
    first.journal.close();
    // What a killed process leaves: rows appended, one of them already written, no lock held.
    leftBehind(dir, '1700000000000-00000000deadbeef.jsonl', '{"id":"b-0","n":0}\n{"id":"b-1","n":1}\n{"id":"b-2","n":2}\n');
    const { journal, lines } = journalIn(dir);
    await waitFor(() => files(dir).length === 0, 'the adopted file to be written and deleted');
    expect(await ids('b-')).toEqual(['b-0', 'b-1', 'b-2']);
    expect(lines.some((l) => l.includes('left by a process that is gone') && l.includes('"rows":3'))).toBe(true);
    journal.close();
  });

  test('a file still locked by a live process is left alone until its lock is released', async () => {
    const dir = join(root, 'locked');
    const path = leftBehind(dir, '1700000000001-00000000cafef00d.jsonl', '{"id":"c-1","n":1}\n');
    const fd = openSync(path, 'r+');
    expect(tryLockExclusive(fd)).toBe(true);
    const { journal } = journalIn(dir, { sweepEveryMs: 20 });
    // A file of a gone process placed after the first sweep: once it is written, a later sweep has passed the locked one by.
    leftBehind(dir, '1700000000003-000000000000dead.jsonl', '{"id":"c-gone","n":0}\n');
    await waitFor(async () => (await ids('c-gone')).length === 1, 'a later sweep to adopt the unlocked file');
    expect(await ids('c-1')).toEqual([]);
    expect(files(dir)).toContain('1700000000001-00000000cafef00d.jsonl');
    closeSync(fd); // the owner exits
    await waitFor(async () => (await ids('c-1')).length === 1, 'the released file to be adopted');
    await waitFor(() => !files(dir).includes('1700000000001-00000000cafef00d.jsonl'), 'the adopted file to be deleted');
    journal.close();
  });

  test("rows given up at shutdown keep their file for the next process, which writes them", async () => {
    const dir = join(root, 'kept');
    const first = journalIn(dir, { ship: async (r, write) => (r.n === 2 ? 'unwritten' : write()) });
    const outcomes = await Promise.all([1, 2, 3].map((n) => first.journal.append({ id: `d-${n}`, n })));
    expect(outcomes).toEqual(['written', 'unwritten', 'written']);
    first.journal.close();
    expect(first.lines.some((l) => l.includes('rows not written are kept for the next start') && l.includes('"rows":1'))).toBe(true);
    expect(files(dir)).toHaveLength(1);
    expect(await ids('d-')).toEqual(['d-1', 'd-3']);
    const { journal } = journalIn(dir);
    await waitFor(() => files(dir).length === 0, 'the kept file to be adopted and deleted');
    expect(await ids('d-')).toEqual(['d-1', 'd-2', 'd-3']);
    journal.close();
  });

  test('a torn last line (a host crash mid-append) is logged and skipped; the other rows are written', async () => {
    const dir = join(root, 'torn');
    leftBehind(dir, '1700000000002-0000000000000bad.jsonl', '{"id":"e-1","n":1}\n{"id":"e-2","n"');
    const { journal, lines } = journalIn(dir);
    await waitFor(() => files(dir).length === 0, 'the torn file to be adopted and deleted');
    expect(await ids('e-')).toEqual(['e-1']);
    expect(lines.some((l) => l.includes('unreadable line skipped') && l.includes('e-2'))).toBe(true);
    journal.close();
  });
});

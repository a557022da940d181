/**
 * A local journal ahead of the database: a row appended here survives the death of the process
 * before it reaches PostgreSQL, so a caller may answer once it is appended instead of waiting for
 * the database commit (a `write` into the kernel's page cache: about 1 µs, against a commit round
 * trip and WAL flush of about 1 ms). The rows are then shipped (the batch writer's group commit,
 * idempotent on row ids), and a file is deleted once every row in it has been written.
 *
 * Files: `<dir>/<time>-<random>.jsonl`, one JSON row per line, each held by its process with an
 * flock(2). A file whose lock can be taken belongs to a process that is gone (killed, crashed,
 * stopped with rows it could not write): any process on the same directory adopts it (at open
 * and every `sweepEveryMs`), ships its rows again and deletes it. Rows already written insert
 * nothing the second time.
 *
 * What it does not cover: a crash of the kernel or the host loses appends not yet on disk; the
 * current file is flushed (fdatasync) every `syncEveryMs`, so at most that much, and only of rows
 * not yet committed in the database (normally a few milliseconds' worth).
 * Hand-written: a few calls around write(2), flock(2) and readdir; no library of the field keeps
 * rows durable ahead of a database this way (docs/decisions/0003-usage-journal.md).
 */
import { closeSync, fdatasync, fdatasyncSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { FatalError } from '../errors';
import { canLock, tryLockExclusive } from '../flock';
import { randomBase62 } from '../ids';
import type { Logger } from '../logger';
import type { RowOutcome } from './batch-writer';

export interface JournalOptions<T> {
  /** The directory of this journal's files (created 0700). */
  dir: string;
  /** Which rows these are, for log lines. */
  name: string;
  log: Logger;
  /** The row as JSON text, one line (what `decode` gets back parsed). */
  encode(row: T): string;
  decode(value: unknown): T;
  /** Writes a row to the database (idempotent): its outcome, as the batch writer's add answers it. */
  ship(row: T): Promise<RowOutcome>;
  /**
   * A file takes at most this many rows; a file whose rows are all written is closed (and deleted)
   * once it is this old. A file with rows still to write stays open: while the database is away,
   * files roll over by rows only, so their number (and open descriptors) stays bounded.
   */
  maxFileRows?: number;
  maxFileAgeMs?: number;
  syncEveryMs?: number;
  /** How often files left by processes that are gone are looked for (default 10 s); null: only when the journal opens. */
  sweepEveryMs?: number | null;
}

interface JournalFile {
  path: string;
  fd: number;
  rows: number;
  /** Rows appended and not yet written (or set aside) in the database. */
  unshipped: number;
  /** A row of it was given up at shutdown: the file stays for the next process to adopt. */
  keep: boolean;
  sealed: boolean;
  startedAt: number;
  unsynced: boolean;
  /** The fdatasync in flight on the thread pool, if any; the descriptor is closed only after it. */
  syncing: Promise<void> | null;
}

const FILE_NAME = /^\d+-[0-9A-Za-z]+\.jsonl$/;

const fileOf = (path: string, fd: number): JournalFile => ({ path, fd, rows: 0, unshipped: 0, keep: false, sealed: false, startedAt: Date.now(), unsynced: false, syncing: null });

export function openJournal<T>(opts: JournalOptions<T>) {
  if (!canLock()) throw new FatalError(`the ${opts.name} journal needs flock(2), which this system's libc does not provide`, 2);
  mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
  const maxRows = opts.maxFileRows ?? 4096;
  const maxAgeMs = opts.maxFileAgeMs ?? 1_000;
  const own = new Map<string, JournalFile>();
  let current: JournalFile | null = null;
  /** Rows whose write was given up (at shutdown): their files stay for the next process. */
  let kept = 0;
  let closed = false;

  function start(): JournalFile {
    for (;;) {
      const path = join(opts.dir, `${Date.now()}-${randomBase62(12)}.jsonl`);
      const fd = openSync(path, 'wx', 0o600);
      // A sweeping process may have locked it between create and lock: it deletes it; take another.
      if (!tryLockExclusive(fd)) {
        closeSync(fd);
        continue;
      }
      const file = fileOf(path, fd);
      own.set(path, file);
      return file;
    }
  }

  const stale = (file: JournalFile) => file.unshipped === 0 && Date.now() - file.startedAt >= maxAgeMs;

  function seal(file: JournalFile) {
    file.sealed = true;
    if (current === file) current = null;
    if (file.unsynced && file.unshipped > 0) sync(file);
    retireIfDone(file);
  }

  /**
   * fdatasync on the thread pool, not the event loop: it takes 0.5 ms on this project's test disk
   * and can take tens of milliseconds on a network volume, and every request would wait for it
   * once a second. One at a time per file: rows appended during a flush are flushed by the next
   * tick, or right after it if the file was sealed meanwhile (the tick flushes the current file only).
   */
  function sync(file: JournalFile) {
    if (file.syncing) return;
    file.unsynced = false;
    file.syncing = new Promise<void>((resolve) =>
      fdatasync(file.fd, (err) => {
        if (err) flushFailed(file, err);
        file.syncing = null;
        if (file.unsynced && file.sealed && file.unshipped > 0) sync(file);
        resolve();
      }),
    );
  }

  /** Closing releases the lock: after every flush in flight, which must not meet a descriptor number reused meanwhile. */
  function closeAfterSync(file: JournalFile) {
    if (file.syncing) void file.syncing.then(() => closeAfterSync(file));
    else closeSync(file.fd);
  }

  /** A sealed file whose rows all have an outcome: deleted (kept if a row was given up), then unlocked. */
  function retireIfDone(file: JournalFile) {
    if (!file.sealed || file.unshipped > 0 || !own.delete(file.path)) return;
    if (file.keep) {
      // At shutdown (the only time a row is given up): on disk before the process exits.
      if (file.unsynced) syncNow(file);
    } else unlinkQuietly(file.path);
    closeAfterSync(file);
  }

  function syncNow(file: JournalFile) {
    file.unsynced = false;
    try {
      fdatasyncSync(file.fd);
    } catch (err) {
      flushFailed(file, err);
    }
  }

  function flushFailed(file: JournalFile, err: unknown) {
    opts.log.warn({ err, file: file.path }, `${opts.name} journal: fdatasync failed`);
  }

  function unlinkQuietly(path: string) {
    try {
      unlinkSync(path);
    } catch {}
  }

  function track(file: JournalFile, shipped: Promise<RowOutcome>): Promise<RowOutcome> {
    file.unshipped++;
    // A writer that failed instead of answering leaves the row for the next process, like 'unwritten'.
    return shipped.catch((): RowOutcome => 'unwritten').then((outcome) => {
      if (outcome === 'unwritten') {
        file.keep = true;
        kept++;
      }
      file.unshipped--;
      retireIfDone(file);
      return outcome;
    });
  }

  /** Ships the rows of files left by processes that are gone; each file is deleted once its rows are written. */
  function sweep() {
    let names: string[];
    try {
      names = readdirSync(opts.dir).filter((n) => FILE_NAME.test(n));
    } catch (err) {
      opts.log.warn({ err, dir: opts.dir }, `${opts.name} journal: cannot read its directory`);
      return;
    }
    for (const name of names) {
      const path = join(opts.dir, name);
      if (own.has(path)) continue;
      let fd: number;
      try {
        fd = openSync(path, 'r+'); // never creates: a file deleted since readdir is skipped
      } catch {
        continue;
      }
      if (!tryLockExclusive(fd)) {
        closeSync(fd); // its process is alive
        continue;
      }
      adopt(fileOf(path, fd));
    }
  }

  function adopt(file: JournalFile) {
    own.set(file.path, file);
    const rows: T[] = [];
    for (const line of readFileSync(file.path, 'utf8').split('\n')) {
      if (!line) continue;
      try {
        rows.push(opts.decode(JSON.parse(line)));
      } catch (err) {
        // Only a crash of the host mid-append leaves a torn line; what it held is shown, not lost silently.
        opts.log.error({ err, file: file.path, line }, `${opts.name} journal: unreadable line skipped`);
      }
    }
    if (rows.length) opts.log.warn({ msg: `${opts.name} journal: shipping rows left by a process that is gone`, file: file.path, rows: rows.length });
    for (const row of rows) void track(file, opts.ship(row));
    file.sealed = true;
    retireIfDone(file);
  }

  const ticker = setInterval(() => {
    if (current && stale(current)) seal(current);
    else if (current?.unsynced) sync(current);
  }, opts.syncEveryMs ?? 1_000);
  ticker.unref?.();
  const sweeper = opts.sweepEveryMs === null ? undefined : setInterval(sweep, opts.sweepEveryMs ?? 10_000);
  sweeper?.unref?.();
  sweep();

  return {
    /**
     * Appends `row` (synchronously: once this returns, the row survives the death of the process)
     * and ships it; resolves its outcome in the database. Throws when the append fails (a full disk):
     * nothing was journaled, and the caller must wait for the database instead.
     */
    append(row: T): Promise<RowOutcome> {
      if (closed) throw new Error(`the ${opts.name} journal is closed`);
      if (current && (current.rows >= maxRows || stale(current))) seal(current);
      if (!current) current = start();
      const file = current;
      const line = `${opts.encode(row)}\n`;
      try {
        // The string itself is written (no Buffer made for it: 0.3 µs of every gateway request).
        const written = writeSync(file.fd, line);
        const size = Buffer.byteLength(line);
        if (written !== size) throw new Error(`short write to the ${opts.name} journal (${written} of ${size} bytes; disk full?)`);
      } catch (err) {
        // Nothing more goes after a torn line: a new file for the next row. This one is not journaled.
        seal(file);
        throw err;
      }
      file.rows++;
      file.unsynced = true;
      return track(file, opts.ship(row));
    },
    /** Rows appended (or adopted) whose database write has no outcome yet. */
    get unshipped() {
      let sum = 0;
      for (const file of own.values()) sum += file.unshipped;
      return sum;
    },
    /**
     * Stops appending; call after the rows' writer has closed (every row has its outcome). Files
     * with a row given up stay for the next process; the others are deleted.
     */
    close() {
      closed = true;
      clearInterval(ticker);
      clearInterval(sweeper);
      for (const file of [...own.values()]) {
        if (file.unshipped > 0) file.keep = true; // not expected after the writer closed; never lose them
        file.unshipped = 0;
        file.sealed = true;
        retireIfDone(file);
      }
      current = null;
      if (kept) opts.log.warn({ msg: `${opts.name} journal: rows not written are kept for the next start`, rows: kept, dir: opts.dir });
    },
  };
}

export type Journal<T> = ReturnType<typeof openJournal<T>>;

/**
 * Group commit for rows that must be durable before their caller goes on: add(row) resolves once
 * the row's batch has committed. Rows that arrive while a batch is being written form the next
 * one, so a busy server writes many rows per transaction and an idle one writes each at once.
 *
 * `write` must be idempotent when told it replays (a batch is written again when the commit's
 * acknowledgement was lost). A batch's first try is told it is not: it may insert without
 * ON CONFLICT, whose speculative insertion costs PostgreSQL a fifth to a third more per row, and
 * the unique violation (23505) that only a replay can meet sends the batch again at once, as a
 * replay; so does any retry after a failure.
 * Failures are told apart by what they say about the rows:
 *  - the database is not serving us (platform/db's isDatabaseUnreachable: unreachable, refusing
 *    connections, read-only, out of resources, shutting down) or aborted the transaction for
 *    another (SQLSTATE class 40: deadlocks, serialization failures): the batch is retried with
 *    backoff, for as long as it takes, or until close()'s deadline;
 *  - anything else is about the rows (an overflowing value, a constraint): the batch is split in
 *    halves and each half written on its own, down to the row at fault, which is set aside
 *    (`setAside` records it with the reason) while every other row is written. A row that cannot
 *    be set aside (no `setAside`, or it failed too) is answered 'unwritten': whoever holds it
 *    keeps it (a journal keeps its file for the next start).
 * Hand-written: no library of the field batches rows under a caller's await with this split
 * (docs/decisions/0002-group-commit-batch-writer.md).
 */
import { rootMessage as reasonOf } from '../errors';
import { sqlState, UNIQUE_VIOLATION } from './sql-state';
import { isDatabaseUnreachable } from './unreachable';
import type { Logger } from '../logger';

/** What happened to a row: committed, set aside as unwritable, or not stored (given up at shutdown, or refused with nowhere to set it aside). */
export type RowOutcome = 'written' | 'set_aside' | 'unwritten';

export interface BatchWriterOptions<T> {
  /** Which rows these are, for log lines. */
  name: string;
  log: Logger;
  /**
   * Writes the rows in one transaction. `replay` true: some may be stored already (write nothing
   * twice); false: none was ever written by this writer (a stored id fails with a unique violation).
   */
  write(rows: T[], replay: boolean): Promise<void>;
  /**
   * Records a row that cannot be written (a dead-letter table, a log line). Absent, or when it
   * fails too, the row is answered 'unwritten'.
   */
  setAside?(row: T, reason: string): Promise<void>;
  /** What a log line shows of a row that could not be written at all. */
  describe?(row: T): unknown;
  maxBatch?: number;
  /**
   * How long a batch that is not full waits for more rows before it is written (default 0: at
   * once, and under load each batch takes what arrived while the one before it was written). For
   * rows nobody waits for (journaled usage, download records): fewer, larger commits, which cost
   * PostgreSQL about half the CPU per row (bench/catalog.ts). flush() and close() cut it short.
   */
  lingerMs?: number;
  /** Batches written at the same time (each on its own connection). */
  concurrency?: number;
}

interface Pending<T> {
  row: T;
  done(outcome: RowOutcome): void;
}

const BACKOFF_MAX_MS = 2_000;

/** True when the error says the database could not be used, not that the rows are wrong: it is not serving us, or rolled the transaction back for another (class 40). */
export function isTransient(err: unknown): boolean {
  return isDatabaseUnreachable(err) || sqlState(err)?.startsWith('40') === true;
}

export function createBatchWriter<T>(opts: BatchWriterOptions<T>) {
  const maxBatch = opts.maxBatch ?? 256;
  const concurrency = opts.concurrency ?? 2;
  const lingerMs = opts.lingerMs ?? 0;
  /** Ends the current linger early (flush, close); null while no batch lingers. */
  let endLinger: (() => void) | null = null;
  function linger(): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, lingerMs);
      endLinger = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => {
      endLinger = null;
    });
  }
  const queue: Array<Pending<T>> = [];
  let active = 0;
  let setAsideCount = 0;
  let giveUpAt = Number.POSITIVE_INFINITY;
  /** close()'s deadline: a write hung on an unreachable database is not waited for past it. */
  const deadlineReached = new Error('shutdown deadline reached');
  let pastDeadline = false;
  /**
   * The writes in flight, each abandoned at the deadline through its own rejecter. Not a race
   * against one promise that lives until shutdown: every race adds a reaction to that promise,
   * freed only when it settles, so a server leaked one promise per batch (+30 000 in two minutes
   * of the soak, bench/soak.ts).
   */
  const inFlight = new Set<(err: Error) => void>();
  function untilDeadline(write: Promise<void>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      inFlight.add(reject);
      write.then(resolve, reject).finally(() => inFlight.delete(reject));
    });
  }
  function reachDeadline() {
    pastDeadline = true;
    for (const reject of inFlight) reject(deadlineReached);
    inFlight.clear();
  }
  let idleWaiters: Array<() => void> = [];

  const givingUp = () => Date.now() >= giveUpAt;

  /** Writes `batch`, retrying while the database is away; splits it when a row is at fault. */
  async function writeBatch(batch: Array<Pending<T>>): Promise<void> {
    let replay = false;
    let failures = 0;
    for (;;) {
      try {
        if (pastDeadline) throw deadlineReached;
        await untilDeadline(opts.write(batch.map((p) => p.row), replay));
        for (const p of batch) p.done('written');
        return;
      } catch (err) {
        if (err === deadlineReached) return giveUp(batch, err);
        if (!replay && sqlState(err) === UNIQUE_VIOLATION) {
          // Stored before: a commit whose acknowledgement was lost, or rows a dead process journaled.
          replay = true;
          continue;
        }
        if (!isTransient(err)) return splitOrSetAside(batch, err);
        replay = true; // the failed try may have committed
        if (givingUp()) return giveUp(batch, err);
        if (failures === 0 || failures % 10 === 0) opts.log.warn({ err, rows: batch.length, failures: failures + 1 }, `${opts.name}: database unavailable; retrying`);
        await Bun.sleep(Math.min(BACKOFF_MAX_MS, 25 * 2 ** failures, Math.max(0, giveUpAt - Date.now())));
        failures++;
      }
    }
  }

  async function splitOrSetAside(batch: Array<Pending<T>>, err: unknown): Promise<void> {
    if (batch.length > 1) {
      const half = Math.ceil(batch.length / 2);
      await writeBatch(batch.slice(0, half));
      await writeBatch(batch.slice(half));
      return;
    }
    const p = batch[0]!;
    const reason = reasonOf(err);
    const row = opts.describe?.(p.row) ?? p.row;
    if (!opts.setAside) {
      opts.log.error({ msg: `${opts.name}: row not written`, reason, row });
      return p.done('unwritten');
    }
    opts.log.error({ msg: `${opts.name}: row set aside`, reason, row });
    try {
      await opts.setAside(p.row, reason);
    } catch (e) {
      opts.log.error({ err: e }, `${opts.name}: could not record a row set aside`);
      return p.done('unwritten');
    }
    setAsideCount++;
    p.done('set_aside');
  }

  function giveUp(batch: Array<Pending<T>>, err: unknown) {
    for (const p of batch) {
      opts.log.error({ msg: `${opts.name}: row not written before shutdown`, reason: reasonOf(err), row: opts.describe?.(p.row) ?? p.row });
      p.done('unwritten');
    }
  }

  async function work() {
    active++;
    try {
      while (queue.length) {
        if (lingerMs && queue.length < maxBatch && !idleWaiters.length) {
          if (endLinger) break; // the batch lingering on another writer collects these rows
          await linger();
        }
        await writeBatch(queue.splice(0, maxBatch));
      }
    } finally {
      active--;
      if (active === 0 && !queue.length) {
        const w = idleWaiters;
        idleWaiters = [];
        for (const fn of w) fn();
      }
    }
  }

  return {
    /** Resolves once the row is committed (or set aside, or given up at shutdown). */
    add(row: T): Promise<RowOutcome> {
      return new Promise<RowOutcome>((done) => {
        queue.push({ row, done });
        // One lingering batch collects for all: a second writer starts only once it is written.
        if (active < concurrency && !endLinger) void work();
      });
    },
    /** Resolves when every row added so far has an outcome. */
    flush(): Promise<void> {
      if (!queue.length && active === 0) return Promise.resolve();
      const idle = new Promise<void>((r) => idleWaiters.push(r));
      endLinger?.();
      return idle;
    },
    /** Writes what is queued; past `deadlineMs` rows still failing are logged and answered 'unwritten'. */
    async close(deadlineMs: number): Promise<void> {
      giveUpAt = Date.now() + deadlineMs;
      const timer = setTimeout(reachDeadline, deadlineMs);
      await this.flush();
      clearTimeout(timer);
    },
    /** Rows waiting for a batch (not counting the batches being written). */
    get queued() {
      return queue.length;
    },
    /** Rows set aside since start. */
    get setAside() {
      return setAsideCount;
    },
  };
}

export type BatchWriter<T> = ReturnType<typeof createBatchWriter<T>>;

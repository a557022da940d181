/**
 * A transaction in one round trip on PostgreSQL: BEGIN, the transaction's statements and COMMIT are
 * written to one connection together, then every answer is read. drizzle's transaction (postgres.js
 * `begin`) waits for BEGIN before the first statement and for the statements before COMMIT: three
 * round trips, which a request that waits for its usage commit pays in full.
 *
 * How a caller's statements are gathered without changing how it is written: `fn` gets a handle
 * (`on`) and runs the usual `database.prepared(text, params, on)` calls; those made before `fn`
 * first yields are recorded, not sent. Then the whole transaction goes out and each recorded call
 * settles with its rows. So every write of the transaction must be issued synchronously, before
 * `fn`'s first `await` (as `Promise.all([...])` of the statements does, nested async calls
 * included as long as none awaits before its statement); a `prepared` call on the handle after
 * that throws. Queries `fn` runs after its statements settled (through drizzle on the
 * handle) run after COMMIT, outside the transaction: only reads that check what was committed
 * belong there (the connection is read-only outside a transaction, so a write there fails).
 *
 * Failures: after a failed statement PostgreSQL refuses the rest (25P02) and COMMIT rolls back;
 * every statement from the failed one on then rejects with the first error, so the caller sees
 * what went wrong rather than "transaction aborted". A COMMIT that answers ROLLBACK with no failed
 * statement, or that fails itself (a connection lost before the acknowledgement), rejects too.
 *
 * The connection is its own (a postgres.js client of max 1, as postgres.js requires for a BEGIN
 * sent by hand) and carries one transaction at a time (two connections measured slower: smaller
 * batches waiting on each other's row locks). A statement seen for the first time on a connection is
 * described by the server before it can run (postgres.js waits for that answer, then sends the
 * rest): were the connection lost in that wait, the rest would go out on the next connection,
 * outside the transaction. So statements are described ahead, on their own, and the transaction
 * is sent only once all of them are known on the current connection.
 * Hand-written: postgres.js pipelines statements but has no API for a transaction sent at once
 * (docs/decisions/0001-pipelined-transaction.md).
 */
import { drizzle } from 'drizzle-orm/postgres-js';
import type postgres from 'postgres';
import type { Db, DbOrTx } from './handles';
import { sqlState } from './sql-state';
import { isDatabaseUnreachable } from './unreachable';

interface Recorded {
  text: string;
  params: string[];
  resolve(rows: unknown[]): void;
  reject(err: unknown): void;
}

export interface Pipeline {
  /** Runs `fn`'s statements as one transaction in one round trip (see the file's comment). */
  run<T>(fn: (on: DbOrTx) => Promise<T>): Promise<T>;
  /** Records `prepared` calls made on the handle while `fn` issues its statements; null for any other handle. */
  record(text: string, params: string[], on: DbOrTx): Promise<unknown[]> | null;
  close(): Promise<void>;
}

/**
 * postgres.js re-sends by itself a statement whose cached plan a schema change invalidated (these
 * are the server routines that say so); that copy goes out after COMMIT, outside the transaction.
 * The connection is read-only outside transactions (default_transaction_read_only), so the copy
 * writes nothing and fails; the transaction, rolled back at COMMIT, is then told to be retried
 * whole (SQLSTATE class 40, transaction rollback): a replay on fresh plans, idempotent.
 */
const STALE_PLAN_ROUTINES = new Set(['RevalidateCachedQuery', 'FetchPreparedStatement', 'transformAssignedExpr']);
const sentAgain = (err: unknown) => STALE_PLAN_ROUTINES.has(String((err as { routine?: unknown } | null)?.routine));
const rolledBack = () => Object.assign(new Error('the transaction rolled back at COMMIT'), { code: '40000' });

/**
 * A BEGIN READ WRITE the server refuses (a standby, after a failover moved DATABASE_URL's address
 * to it, says 0A000 "cannot set transaction read-write mode during recovery") is told as the
 * read-only refusal PostgreSQL gives every other write there (25006): the database is not serving
 * writes, which is no fault of the transaction's rows. A lost connection keeps its own error.
 */
function refusedBegin(err: unknown): unknown {
  if (isDatabaseUnreachable(err) || sqlState(err) === undefined) return err;
  return Object.assign(new Error(`the database refused a read-write transaction: ${(err as Error).message}`), { code: '25006', cause: err });
}

export function createPipeline(connect: (onclose: () => void) => postgres.Sql): Pipeline {
  let client: postgres.Sql | null = null;
  let handle: Db | null = null;
  /** Statement texts the current connection has described (it forgets them when it closes). */
  const described = new Set<string>();
  /** The statements of the transaction being gathered; null while none is. */
  let recording: Recorded[] | null = null;
  /** One transaction at a time on the one connection. */
  let tail: Promise<unknown> = Promise.resolve();

  function open(): { sql: postgres.Sql; on: Db } {
    if (!client) {
      client = connect(() => described.clear());
      handle = drizzle(client) as unknown as Db;
    }
    return { sql: client, on: handle! };
  }

  async function describeAhead(sql: postgres.Sql, statements: Recorded[]): Promise<void> {
    // A close while describing clears `described` again: loop until every text is known at once.
    for (;;) {
      const missing = statements.filter((s) => s.params.length && !described.has(s.text));
      if (!missing.length) return;
      await Promise.all(
        missing.map(async (s) => {
          await sql.unsafe(s.text, s.params, { prepare: true }).describe();
          described.add(s.text);
        }),
      );
    }
  }

  async function runOne<T>(fn: (on: DbOrTx) => Promise<T>): Promise<T> {
    const { sql, on } = open();
    const statements: Recorded[] = [];
    recording = statements;
    let result: Promise<T>;
    try {
      result = fn(on);
    } finally {
      recording = null;
    }
    // fn's statements settle below; its own rejection is read after them.
    result.catch(() => {});
    if (!statements.length) return result;
    try {
      await describeAhead(sql, statements);
    } catch (err) {
      for (const s of statements) s.reject(err);
      return result;
    }
    const begin = sql.unsafe('begin read write').execute();
    const sent = statements.map((s) => sql.unsafe(s.text, s.params, { prepare: true }).execute());
    const commit = sql.unsafe('commit').execute();
    const [beginDone, commitDone, ...answers] = await Promise.allSettled([begin, commit, ...sent]);
    // The first failure in sending order is the cause; the ones after it are PostgreSQL refusing
    // statements of an aborted transaction (25P02).
    let first: unknown = beginDone.status === 'rejected' ? refusedBegin(beginDone.reason) : null;
    answers.forEach((a, i) => {
      if (a.status === 'rejected') first ??= sentAgain(a.reason) ? rolledBack() : a.reason;
      if (first !== null) statements[i]!.reject(first);
      else statements[i]!.resolve((a as PromiseFulfilledResult<unknown>).value as unknown[]);
    });
    const value = await result;
    if (commitDone.status === 'rejected') throw commitDone.reason;
    if ((commitDone.value as unknown as { command?: string }).command !== 'COMMIT') throw rolledBack();
    return value;
  }

  return {
    run<T>(fn: (on: DbOrTx) => Promise<T>): Promise<T> {
      const next = tail.then(() => runOne(fn));
      tail = next.catch(() => {});
      return next;
    },
    record(text, params, on) {
      if (!handle || on !== handle) return null;
      if (!recording) throw new Error('a statement of a pipelined transaction was issued after the transaction was sent');
      const list = recording;
      return new Promise<unknown[]>((resolve, reject) => list.push({ text, params, resolve, reject }));
    },
    async close() {
      await client?.end({ timeout: 5 });
    },
  };
}

/**
 * The usage writer: a request's usage row and its wallet debit commit before its answer ends.
 * Rows go through platform/db's batch writer (group commit: the rows of the requests finishing
 * together share one transaction, each request awaiting its batch). One transaction per batch,
 * sent in one round trip on PostgreSQL (platform/db's pipelined transaction), inserts the rows (a replayed id inserts nothing), adds the rows it inserted into the hourly and
 * daily rollups, records one `usage` ledger entry per billed row (idempotent on `usage:<row id>`)
 * and lowers this process's wallet grants and API key spend grants by what was spent. While the database is not
 * serving us (platform/db's isDatabaseUnreachable) a batch is retried until it does. A row that cannot be written is
 * kept in router_usage_set_aside with the reason, or in the set-aside file when that insert fails too, and the others
 * are written: a usage row is never dropped. Writes lock wallets and
 * rollup rows in sorted order so concurrent batches cannot deadlock each other.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import type { Grant } from '../billing';
import type { AppContext } from '../../app-context';
import { type DbOrTx, type RowOutcome, createBatchWriter, openJournal } from '../../platform/db';

export interface UsageRecord {
  id: string;
  createdAt: Date;
  userId: string | null;
  keyId: string | null;
  /** An organization's key: its member's budget id (metering.key-limits.types.ts), whose spend is rolled up beside the key's. */
  memberKey?: string | null;
  entrypoint: string;
  model: string;
  backend: string | null;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens served from the upstream's cache (within promptTokens). */
  cachedTokens: number;
  /** Reasoning tokens (within completionTokens). */
  reasoningTokens: number;
  costMicros: bigint;
  costUsdMicros: bigint;
  tokensCounted: boolean;
  /** The completion was billed at the request's maximum, below the reported figure the row keeps. */
  clamped: boolean;
  latencyMs: number;
  status: number;
  streamed: boolean;
  aborted: boolean;
  requestId: string | null;
}

export interface UsageDebitor {
  debitUsageBatch(
    tx: DbOrTx,
    entries: Array<{ userId: string; amountMicros: bigint; reference: string; description: string }>,
    holder: string,
    opts: { firstTry: boolean },
  ): Promise<{ grants: Map<string, Grant>; committed: () => void }>;
}

/** The API key spend limits' part of a usage commit (metering.key-limits.ts). */
export interface KeySpendHook {
  /** Issues, without awaiting, the statement lowering this process's key grants by the rows' cost; null when there is none. */
  consume(on: DbOrTx, rows: UsageRecord[]): Promise<Map<string, Grant>> | null;
  /** The grants it lowered, once the transaction committed. */
  committed(grants: Map<string, Grant>): void;
}

export interface UsageWriterOptions {
  /** false: commit without waiting for the WAL flush (USAGE_SYNCHRONOUS_COMMIT=off, docs/design/usage-commit.md). */
  synchronousCommit: boolean;
  /** USAGE_JOURNAL=on: rows are journaled under this directory and answered before their commit (docs/design/usage-journal.md). */
  journalDir?: string | null;
}

/** A row that could not be written, and why: what router_usage_set_aside and the set-aside file keep. */
interface SetAsideRow {
  record: UsageRecord;
  reason: string;
}

/** Whether `dir` holds files (a missing directory holds none). */
function hasFiles(dir: string): boolean {
  try {
    return readdirSync(dir).length > 0;
  } catch {
    return false;
  }
}

/**
 * Rows journaled and not yet committed past which a request waits for its commit again: a database
 * away for long must not let the backlog (and what answered requests owe) grow without bound.
 */
const JOURNAL_BACKLOG = 10_000;
/** How long a journaled row waits for others before its batch is written (bench/gateway.ts, cpd-journal). */
const JOURNAL_LINGER_MS = 5;

/**
 * Adds the batch's groups (the `grouped` CTE: the rows inserted now, summed once per hour, user,
 * model, entrypoint and key) into a rollup table, in key order. Each rollup sums a few groups
 * rather than every row again (the three rollups each summing the rows cost PostgreSQL 0.9 µs more
 * per row).
 */
function upsertRollup(table: string, bucket: 'hour' | 'day'): string {
  const add = (c: string) => `${c} = ${table}.${c} + excluded.${c}`;
  return `
    insert into ${table} (${bucket}, user_id, model, entrypoint, requests, tokens, cost_micros, cost_usd_micros)
    select ${bucket}, user_id, model, entrypoint, sum(requests), sum(tokens), sum(cost_micros), sum(cost_usd_micros)
    from grouped
    group by 1, 2, 3, 4
    order by 1, 2, 3, 4
    on conflict (${bucket}, user_id, model, entrypoint) do update set
      ${['requests', 'tokens', 'cost_micros', 'cost_usd_micros'].map(add).join(', ')}`;
}

/**
 * A row as the journal's line and the insert's batch parameter carry it: one letter per column.
 * PostgreSQL's JSON reader goes through every byte of the batch, and the column names were half of
 * them: with these keys, and the hour and day cut by the statement, reading a 160-row batch took
 * 4.7 instead of 7.0 µs of its CPU per row. WIRE_COLUMNS names each letter's column.
 */
const wireOf = (r: UsageRecord) => ({
  i: r.id,
  t: r.createdAt.toISOString(), // always UTC, "2026-11-27T04:05:06.789Z"
  u: r.userId,
  k: r.keyId,
  e: r.entrypoint,
  m: r.model,
  b: r.backend,
  p: r.promptTokens,
  c: r.completionTokens,
  h: r.cachedTokens,
  g: r.reasoningTokens,
  x: String(r.costMicros),
  y: String(r.costUsdMicros),
  n: r.tokensCounted,
  z: r.clamped,
  l: r.latencyMs,
  s: r.status,
  r: r.streamed,
  a: r.aborted,
  q: r.requestId,
  o: r.memberKey ?? null,
});
type Wire = ReturnType<typeof wireOf>;

/** Each wire key's router_usage column and its type, as the insert statement reads the batch. */
const WIRE_COLUMNS: ReadonlyArray<readonly [key: keyof Wire, column: string, type: string]> = [
  ['i', 'id', 'text'],
  ['t', 'created_at', 'timestamptz'],
  ['u', 'user_id', 'text'],
  ['k', 'key_id', 'text'],
  ['e', 'entrypoint', 'text'],
  ['m', 'model', 'text'],
  ['b', 'backend', 'text'],
  ['p', 'prompt_tokens', 'integer'],
  ['c', 'completion_tokens', 'integer'],
  ['h', 'cached_tokens', 'integer'],
  ['g', 'reasoning_tokens', 'integer'],
  ['x', 'cost_micros', 'bigint'],
  ['y', 'cost_usd_micros', 'bigint'],
  ['n', 'tokens_counted', 'boolean'],
  ['z', 'clamped', 'boolean'],
  ['l', 'latency_ms', 'integer'],
  ['s', 'status', 'integer'],
  ['r', 'streamed', 'boolean'],
  ['a', 'aborted', 'boolean'],
  ['q', 'request_id', 'text'],
  ['o', 'member_key', 'text'],
];

/** A row as log lines and router_usage_set_aside show it: by its columns' names. */
const jsonOf = (r: UsageRecord): Record<string, unknown> => {
  const wire = wireOf(r);
  return Object.fromEntries(WIRE_COLUMNS.map(([key, column]) => [column, wire[key]]));
};

/**
 * Each row's wire text, made once: a journaled row's line and its part of the insert's batch
 * parameter are the same text (it was made twice, each time with its dates formatted).
 */
const wireTexts = new WeakMap<UsageRecord, string>();
function wireTextOf(r: UsageRecord): string {
  let text = wireTexts.get(r);
  if (text === undefined) {
    text = JSON.stringify(wireOf(r));
    wireTexts.set(r, text);
  }
  return text;
}

/** The wire form of a line keyed by column names, as journals written before the wire form kept it. */
const wireOfColumns = (line: Record<string, unknown>) => Object.fromEntries(WIRE_COLUMNS.map(([key, column]) => [key, line[column]])) as Wire;

/**
 * The row back from a journal line: the wire form, or the column names of a journal written
 * before it (a process stopped with rows in its journal, then upgraded).
 */
function recordOf(line: unknown): UsageRecord {
  const w = (line as Partial<Wire>).i === undefined ? wireOfColumns(line as Record<string, unknown>) : (line as Wire);
  return {
    id: w.i,
    createdAt: new Date(w.t),
    userId: w.u,
    keyId: w.k,
    entrypoint: w.e,
    model: w.m,
    backend: w.b,
    promptTokens: w.p,
    completionTokens: w.c,
    // Journals written before these counts existed have none.
    cachedTokens: w.h ?? 0,
    reasoningTokens: w.g ?? 0,
    costMicros: BigInt(w.x),
    costUsdMicros: BigInt(w.y),
    tokensCounted: w.n,
    // Journals written before the mark existed have none.
    clamped: w.z ?? false,
    latencyMs: w.l,
    status: w.s,
    streamed: w.r,
    aborted: w.a,
    requestId: w.q,
    // Journals written before organizations have none.
    memberKey: w.o ?? null,
  };
}

/**
 * The batch as one JSON parameter (cheap to build, unlike thousands of bound parameters), inserted
 * into router_usage and aggregated into router_usage_hourly, router_usage_daily and (per API key)
 * router_usage_key_daily by one statement;
 * only rows inserted now are added up (a replay adds nothing); rollup rows are upserted in key
 * order so concurrent writers lock them in the same order. A batch's first try inserts without
 * ON CONFLICT, whose speculative insertion costs PostgreSQL about a seventh more per row (1.9 µs
 * of 15 here): only a replay after a lost acknowledgement can meet an id already stored (the
 * unique violation sends the batch again as a replay: platform/db's batch writer). A first try that succeeds inserted every
 * row, so its rollups read the batch itself, without joining the ids the insert returns.
 *
 * $1: the batch as JSON text (wire rows), $2: the currency. Read as json, not jsonb: each row's
 * object is read once, and jsonb would first build its binary form of the whole batch (a 64-row
 * batch: 0.67–0.78 → 0.43–0.48 ms of PostgreSQL's CPU). `::text::json`: a parameter typed json
 * would be serialized again by the driver. The hour and day are cut from the UTC time here.
 */
const insertSql = (replay: boolean) => `
    with batch as (
      select ${WIRE_COLUMNS.map(([key, column]) => `${key} as ${column}`).join(', ')},
        date_trunc('hour', t, 'UTC') as hour, date_trunc('day', t, 'UTC') as day
      from json_to_recordset($1::text::json) as w(${WIRE_COLUMNS.map(([key, , type]) => `${key} ${type}`).join(', ')})
    ), usage_rows as (
      insert into router_usage (id, created_at, user_id, key_id, entrypoint, model, backend, prompt_tokens, completion_tokens,
        cached_tokens, reasoning_tokens, cost_micros, currency, cost_usd_micros, tokens_counted, clamped, latency_ms, status, streamed, aborted, request_id)
      select id, created_at, user_id, key_id, entrypoint, model, backend, prompt_tokens, completion_tokens,
        coalesce(cached_tokens, 0), coalesce(reasoning_tokens, 0), cost_micros, $2, cost_usd_micros, tokens_counted, clamped, latency_ms, status, streamed, aborted, request_id
      from batch
      ${replay ? 'on conflict (id) do nothing returning id' : ''}
    ), inserted as (
      ${replay ? 'select batch.* from batch join usage_rows using (id)' : 'select * from batch'}
    ), grouped as (
      select hour, day, coalesce(user_id, '') as user_id, model, entrypoint, key_id, member_key, count(*) as requests,
        sum(prompt_tokens + completion_tokens) as tokens, sum(cost_micros) as cost_micros, sum(cost_usd_micros) as cost_usd_micros
      from inserted
      group by 1, 2, 3, 4, 5, 6, 7
    ), daily as (${upsertRollup('router_usage_daily', 'day')}
    ), key_daily as (
      insert into router_usage_key_daily (day, key_id, cost_micros)
      select day, spender, sum(cost_micros) from (
        select day, key_id as spender, cost_micros from grouped where key_id is not null
        union all
        select day, member_key, cost_micros from grouped where member_key is not null
      ) spenders
      group by 1, 2
      order by 1, 2
      on conflict (day, key_id) do update set cost_micros = router_usage_key_daily.cost_micros + excluded.cost_micros
    )
    ${upsertRollup('router_usage_hourly', 'hour')}`;
const INSERT_FIRST_TRY = insertSql(false);
const INSERT_REPLAY = insertSql(true);

export function createUsageWriter(
  ctx: AppContext,
  billing: UsageDebitor,
  holder: string,
  onCommitted: (grants: Map<string, Grant>) => void,
  keySpend: KeySpendHook,
  opts: UsageWriterOptions,
) {
  const { database } = ctx;
  const currency = ctx.config.currency;

  async function write(batch: UsageRecord[], replay: boolean): Promise<void> {
    // One round trip on PostgreSQL (platform/db's pipelined): every statement below is issued
    // before the first await, as that requires.
    const { debited, keyGrants } = await database.pipelined(async (tx) => {
      // One ledger entry per billed request, so a user can match each entry to its request.
      const debits = batch
        .filter((r) => r.userId && r.costMicros > 0n)
        .map((r) => ({
          userId: r.userId!,
          amountMicros: r.costMicros,
          reference: `usage:${r.id}`,
          description: `${r.model} via ${r.entrypoint}: ${r.promptTokens}+${r.completionTokens} tokens`,
        }));
      // Sent together in this order (one round trip), run by the server in this order: rollup rows,
      // then wallet rows, then wallet grant rows, then key grant rows are locked in the same order
      // by every writer, so concurrent batches and grant requests cannot deadlock.
      const steps: Array<Promise<unknown>> = [];
      if (!opts.synchronousCommit) steps.push(database.prepared('set local synchronous_commit = off', [], tx));
      steps.push(database.prepared(replay ? INSERT_REPLAY : INSERT_FIRST_TRY, [`[${batch.map(wireTextOf).join(',')}]`, currency], tx));
      const debited = billing.debitUsageBatch(tx, debits, holder, { firstTry: !replay });
      const keyGrants = keySpend.consume(tx, batch);
      await Promise.all([...steps, debited, keyGrants]);
      return { debited: await debited, keyGrants: await keyGrants };
    });
    debited.committed();
    onCommitted(debited.grants);
    if (keyGrants) keySpend.committed(keyGrants);
  }

  /** Stores rows that cannot be written in router_usage_set_aside (a row stored before inserts nothing). */
  async function storeSetAside(rows: SetAsideRow[]): Promise<void> {
    const values = rows.map(
      ({ record: r, reason }) => sql`(${r.id}, ${r.createdAt.toISOString()}::timestamptz, ${r.userId}, ${JSON.stringify(jsonOf(r))}::jsonb, ${reason})`,
    );
    await database.query(sql`insert into router_usage_set_aside (id, created_at, user_id, row, reason) values ${sql.join(values, sql`, `)} on conflict (id) do nothing`);
  }

  /**
   * The set-aside file, DATA_DIR/usage-set-aside/*.jsonl: rows whose set-aside insert failed too
   * (the database went away meanwhile, or refuses the row there as well). A row appended there
   * survives the death of the process; it is stored in router_usage_set_aside once the database
   * takes it (retried while the database is not serving us), and a file is deleted once all its
   * rows are. A file whose rows could not be stored before the process ended, or that a crashed
   * process left, is retried by the next start on this DATA_DIR (platform/db's journal: each file
   * locked by its process, so processes sharing the directory store each row once, and a row
   * stored twice inserts nothing the second time). Opened at start when files wait there, else at
   * the first row that needs it.
   */
  function openSetAsideFile() {
    const stored = createBatchWriter<SetAsideRow>({
      name: 'usage set-aside',
      log: ctx.log,
      write: (rows) => storeSetAside(rows),
      describe: ({ record, reason }) => ({ ...jsonOf(record), set_aside_for: reason }),
      concurrency: 1,
    });
    const file = openJournal<SetAsideRow>({
      dir: setAsideDir,
      name: 'usage set-aside',
      log: ctx.log,
      encode: ({ record, reason }) => `{"reason":${JSON.stringify(reason)},"row":${wireTextOf(record)}}`,
      decode: (line) => ({ record: recordOf((line as { row: unknown }).row), reason: String((line as { reason: unknown }).reason) }),
      ship: (row) => stored.add(row),
      // Files of processes that are gone are retried by the next start, not every few seconds.
      sweepEveryMs: null,
    });
    return { stored, file };
  }
  const setAsideDir = join(ctx.config.dataDir, 'usage-set-aside');
  let setAsideFile = hasFiles(setAsideDir) ? openSetAsideFile() : null;

  /**
   * A row that cannot be written goes to router_usage_set_aside; if that fails too, to the
   * set-aside file. Throws (the row then stays unwritten) only when the file cannot be appended to.
   */
  async function setAside(record: UsageRecord, reason: string): Promise<void> {
    try {
      await storeSetAside([{ record, reason }]);
    } catch (err) {
      setAsideFile ??= openSetAsideFile();
      void setAsideFile.file.append({ record, reason });
      ctx.log.error({ err, row_id: record.id, dir: setAsideDir }, 'usage: set-aside row kept in the set-aside file until router_usage_set_aside takes it');
    }
  }

  // Journaled rows wait for nobody: their commits linger a moment to gather larger batches.
  const writer = createBatchWriter<UsageRecord>({
    name: 'usage',
    log: ctx.log,
    write,
    setAside,
    describe: jsonOf,
    maxBatch: 256,
    concurrency: 1,
    lingerMs: opts.journalDir ? JOURNAL_LINGER_MS : 0,
  });
  const journal = opts.journalDir
    ? openJournal<UsageRecord>({ dir: opts.journalDir, name: 'usage', log: ctx.log, encode: wireTextOf, decode: recordOf, ship: (r) => writer.add(r) })
    : null;
  return {
    /** Resolves once the row and its debit are committed ('written'), set aside, or given up at shutdown. */
    record: (r: UsageRecord): Promise<RowOutcome> => writer.add(r),
    /**
     * With the journal: appends the row (it now survives the death of this process) and answers
     * the promise of its commit, which the caller need not wait for. Null when the caller must wait
     * for the commit instead: no journal, a backlog of JOURNAL_BACKLOG rows, or a failed append.
     */
    journaled(r: UsageRecord): Promise<RowOutcome> | null {
      if (!journal || journal.unshipped >= JOURNAL_BACKLOG) return null;
      try {
        return journal.append(r);
      } catch (err) {
        ctx.log.error({ err }, 'usage journal: append failed; this request waits for its commit');
        return null;
      }
    },
    flush: () => writer.flush(),
    async close(deadlineMs: number) {
      const until = Date.now() + deadlineMs;
      await writer.close(deadlineMs);
      // After the writer: its last rows may have been set aside into the file.
      if (setAsideFile) {
        await setAsideFile.stored.close(Math.max(0, until - Date.now()));
        setAsideFile.file.close();
      }
      journal?.close();
    },
    get queued() {
      return writer.queued;
    },
    get setAside() {
      return writer.setAside;
    },
  };
}

export type UsageWriter = ReturnType<typeof createUsageWriter>;

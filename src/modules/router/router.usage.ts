/**
 * The usage writer. Usage rows are queued in process and written in batches: one database
 * transaction per batch inserts the rows, upserts the hourly and daily rollups and records one `usage`
 * ledger entry per billed row through billing.debitUsageMany (one multi-row statement, idempotent on
 * `usage:<usage row id>`, each wallet updated once). A response never waits for the
 * database; a full queue (maxQueue rows) makes new requests wait for room (backpressure), and
 * close() — registered on ctx.onShutdown, after the listener stopped — drains everything.
 * Writes lock wallets and rollup rows in sorted order so replicas cannot deadlock each other.
 */
import { sql } from 'drizzle-orm';
import type { AppContext } from '../../platform/context';
import type { DbOrTx } from '../../platform/db';

export interface UsageRecord {
  id: string;
  createdAt: Date;
  userId: string | null;
  keyId: string | null;
  entrypoint: string;
  model: string;
  backend: string | null;
  promptTokens: number;
  completionTokens: number;
  costMicros: bigint;
  costUsdMicros: bigint;
  tokensCounted: boolean;
  latencyMs: number;
  status: number;
  streamed: boolean;
  aborted: boolean;
  requestId: string | null;
  /** Called once the row is committed, or given up on (an API key's spend hold is released then). */
  afterWrite?: () => void;
}

export interface UsageDebitor {
  debitUsageMany(on: DbOrTx, entries: Array<{ userId: string; amountMicros: bigint; reference: string; description: string }>): Promise<Map<string, bigint>>;
}

export interface UsageWriterOptions {
  maxQueue?: number;
  batchSize?: number;
  /** How long close() keeps retrying a failing database before logging what it could not write. */
  closeDeadlineMs?: number;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** Adds the batch (the `batch` CTE) into a rollup table, in key order. */
function upsertRollup(table: string, bucket: 'hour' | 'day') {
  const add = (c: string) => `${c} = ${table}.${c} + excluded.${c}`;
  return sql.raw(`
    insert into ${table} (${bucket}, user_id, model, entrypoint, requests, tokens, cost_micros, cost_usd_micros)
    select ${bucket}, coalesce(user_id, ''), model, entrypoint, count(*), sum(prompt_tokens + completion_tokens), sum(cost_micros), sum(cost_usd_micros)
    from batch
    group by 1, 2, 3, 4
    order by 1, 2, 3, 4
    on conflict (${bucket}, user_id, model, entrypoint) do update set
      ${['requests', 'tokens', 'cost_micros', 'cost_usd_micros'].map(add).join(', ')}`);
}

/**
 * The batch as one JSON parameter (cheap to build, unlike thousands of bound parameters), inserted
 * into router_usage and aggregated into router_usage_hourly, router_usage_daily and router_usage_key_daily by one statement; rollup rows are
 * upserted in key order so concurrent writers lock them in the same order.
 */
function insertStatement(batch: UsageRecord[], currency: string) {
  const rows = JSON.stringify(
    batch.map((r) => ({
      id: r.id,
      created_at: r.createdAt.toISOString(),
      hour: new Date(Math.floor(r.createdAt.getTime() / HOUR_MS) * HOUR_MS).toISOString(),
      day: new Date(Math.floor(r.createdAt.getTime() / DAY_MS) * DAY_MS).toISOString(),
      user_id: r.userId,
      key_id: r.keyId,
      entrypoint: r.entrypoint,
      model: r.model,
      backend: r.backend,
      prompt_tokens: r.promptTokens,
      completion_tokens: r.completionTokens,
      cost_micros: String(r.costMicros),
      cost_usd_micros: String(r.costUsdMicros),
      tokens_counted: r.tokensCounted,
      latency_ms: r.latencyMs,
      status: r.status,
      streamed: r.streamed,
      aborted: r.aborted,
      request_id: r.requestId,
    })),
  );
  return sql`
    with batch as (
      select * from jsonb_to_recordset(${rows}::jsonb) as x(
        id text, created_at timestamptz, hour timestamptz, day timestamptz, user_id text, key_id text, entrypoint text, model text,
        backend text, prompt_tokens integer, completion_tokens integer, cost_micros bigint, cost_usd_micros bigint,
        tokens_counted boolean, latency_ms integer, status integer, streamed boolean, aborted boolean, request_id text)
    ), usage_rows as (
      insert into router_usage (id, created_at, user_id, key_id, entrypoint, model, backend, prompt_tokens, completion_tokens,
        cost_micros, currency, cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted, request_id)
      select id, created_at, user_id, key_id, entrypoint, model, backend, prompt_tokens, completion_tokens,
        cost_micros, ${currency}, cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted, request_id
      from batch
    ), daily as (${upsertRollup('router_usage_daily', 'day')}
    ), key_daily as (
      insert into router_usage_key_daily (day, key_id, cost_micros)
      select day, key_id, sum(cost_micros) from batch where key_id is not null
      group by 1, 2
      order by 1, 2
      on conflict (day, key_id) do update set cost_micros = router_usage_key_daily.cost_micros + excluded.cost_micros
    )
    ${upsertRollup('router_usage_hourly', 'hour')}`;
}

export function createUsageWriter(
  ctx: AppContext,
  billing: UsageDebitor,
  onCommitted: (debits: Map<string, bigint>, balances: Map<string, bigint>) => void,
  opts: UsageWriterOptions = {},
) {
  const maxQueue = opts.maxQueue ?? 10_000;
  const batchSize = opts.batchSize ?? 256;
  const { db } = ctx.database;
  const currency = ctx.config.currency;
  const queue: UsageRecord[] = [];
  let roomWaiters: Array<() => void> = [];
  let idleWaiters: Array<() => void> = [];
  let running: Promise<void> | null = null;
  let closing = false;
  let closeDeadline = Number.POSITIVE_INFINITY;

  async function writeBatch(batch: UsageRecord[]): Promise<Map<string, bigint>> {
    return db.transaction(async (tx) => {
      await ctx.database.query(insertStatement(batch, currency), tx);
      // One ledger entry per billed request, so a user can match each entry to its request.
      const debits = batch
        .filter((r) => r.userId && r.costMicros > 0n)
        .map((r) => ({
          userId: r.userId!,
          amountMicros: r.costMicros,
          reference: `usage:${r.id}`,
          description: `${r.model} via ${r.entrypoint}: ${r.promptTokens}+${r.completionTokens} tokens`,
        }));
      return billing.debitUsageMany(tx, debits);
    });
  }

  function debitsOf(batch: UsageRecord[]): Map<string, bigint> {
    const debits = new Map<string, bigint>();
    for (const r of batch) if (r.userId) debits.set(r.userId, (debits.get(r.userId) ?? 0n) + r.costMicros);
    return debits;
  }

  async function drain() {
    let failures = 0;
    while (queue.length) {
      const batch = queue.slice(0, batchSize);
      try {
        // A batch that keeps failing is retried row by row, so one bad row cannot block the rest.
        const balances = failures >= 3 && batch.length > 1 ? await writeOne(batch[0]!) : await writeBatch(batch);
        const written = failures >= 3 && batch.length > 1 ? [batch[0]!] : batch;
        queue.splice(0, written.length);
        failures = 0;
        onCommitted(debitsOf(written), balances);
        for (const r of written) r.afterWrite?.();
        wakeRoom();
      } catch (err) {
        failures++;
        ctx.log.error({ err, rows: batch.length, failures }, 'usage write failed; retrying');
        if (closing && Date.now() > closeDeadline) {
          for (const { afterWrite, ...r } of queue.splice(0)) {
            ctx.log.error({ msg: 'usage row not written', usage: { ...r, costMicros: String(r.costMicros), costUsdMicros: String(r.costUsdMicros) } });
            afterWrite?.();
          }
          break;
        }
        if (failures > 6 && batch.length === 1) {
          ctx.log.error({ msg: 'usage row dropped after repeated failures', usage_id: batch[0]!.id });
          queue.splice(0, 1)[0]!.afterWrite?.();
          continue;
        }
        await Bun.sleep(Math.min(5_000, 50 * 2 ** failures));
      }
    }
  }

  const writeOne = (r: UsageRecord) => writeBatch([r]);

  function wakeRoom() {
    if (queue.length >= maxQueue) return;
    const w = roomWaiters;
    roomWaiters = [];
    for (const fn of w) fn();
  }

  function kick() {
    running ??= drain().finally(() => {
      running = null;
      if (queue.length) kick();
      else {
        const w = idleWaiters;
        idleWaiters = [];
        for (const fn of w) fn();
      }
    });
  }

  return {
    /** Queues a row; resolves at once unless the queue is full (then when there is room). */
    async enqueue(record: UsageRecord): Promise<void> {
      while (queue.length >= maxQueue) await new Promise<void>((r) => roomWaiters.push(r));
      queue.push(record);
      // Batch what arrives in the same tick: start writing on the next macrotask.
      if (!running) setImmediate(kick);
    },
    /** Resolves when every row queued so far is committed. */
    flush(): Promise<void> {
      if (!queue.length && !running) return Promise.resolve();
      return new Promise<void>((r) => {
        idleWaiters.push(r);
        kick();
      });
    },
    /** Drains the queue (graceful stop); gives up on an unreachable database after closeDeadlineMs. */
    async close() {
      closing = true;
      closeDeadline = Date.now() + (opts.closeDeadlineMs ?? 10_000);
      await this.flush();
    },
    get queued() {
      return queue.length;
    },
  };
}

export type UsageWriter = ReturnType<typeof createUsageWriter>;

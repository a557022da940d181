import { bigint, boolean, index, integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/** One row per routed request (gateway or agent), written with its wallet debit in one transaction. */
export const routerUsage = pgTable(
  'router_usage',
  {
    id: text('id').primaryKey(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    /** null: an unbilled open agent call (reported as user `anonymous`). */
    userId: text('user_id'),
    keyId: text('key_id'),
    /** What the caller asked for: a model slug or a route name. */
    entrypoint: text('entrypoint').notNull(),
    /** What served it: a model slug. */
    model: text('model').notNull(),
    backend: text('backend'),
    promptTokens: integer('prompt_tokens').notNull(),
    completionTokens: integer('completion_tokens').notNull(),
    /** Prompt tokens served from the upstream's prompt cache (within prompt_tokens). */
    cachedTokens: integer('cached_tokens').notNull().default(0),
    /** Reasoning tokens (within completion_tokens). */
    reasoningTokens: integer('reasoning_tokens').notNull().default(0),
    /** Site currency micro-units. */
    costMicros: bigint('cost_micros', { mode: 'bigint' }).notNull(),
    currency: text('currency').notNull(),
    costUsdMicros: bigint('cost_usd_micros', { mode: 'bigint' }).notNull(),
    /** True when the prompt/completion counts came from our tokenizer, not the upstream. */
    tokensCounted: boolean('tokens_counted').notNull(),
    /** The completion was billed at the request's maximum (max(n, 1) × max_tokens), below the reported completion_tokens kept here. */
    clamped: boolean('clamped').notNull().default(false),
    latencyMs: integer('latency_ms').notNull(),
    status: integer('status').notNull(),
    streamed: boolean('streamed').notNull(),
    aborted: boolean('aborted').notNull(),
    requestId: text('request_id'),
  },
  // (user_id, created_at, id): a user's rows in keyset order (the usage log, newest first, with
  // its cursor and time range) and a user's time window (the cost report); the model filter is
  // read off it (a user's few models each match many rows). (user_id, key_id, created_at, id): the
  // key filter in the same order; without it the planner reads and sorts all of the user's rows
  // (bench/usage-log.ts measures both, and what the index costs a usage insert).
  (t) => [
    index('router_usage_user_created_id_idx').on(t.userId, t.createdAt, t.id),
    index('router_usage_user_key_created_id_idx').on(t.userId, t.keyId, t.createdAt, t.id),
    index('router_usage_created_idx').on(t.createdAt),
  ],
);

/** A rollup of router_usage per (time bucket, user, model, entrypoint); user_id '' stands for no account. */
function rollupTable<B extends 'hour' | 'day'>(name: string, bucket: B) {
  return pgTable(
    name,
    {
      bucket: timestamp(bucket, { withTimezone: true, mode: 'date' }).notNull(),
      userId: text('user_id').notNull(),
      model: text('model').notNull(),
      entrypoint: text('entrypoint').notNull(),
      requests: bigint('requests', { mode: 'bigint' }).notNull(),
      tokens: bigint('tokens', { mode: 'bigint' }).notNull(),
      costMicros: bigint('cost_micros', { mode: 'bigint' }).notNull(),
      costUsdMicros: bigint('cost_usd_micros', { mode: 'bigint' }).notNull(),
    },
    (t) => [primaryKey({ columns: [t.bucket, t.userId, t.model, t.entrypoint] }), index(`${name}_user_${bucket}_idx`).on(t.userId, t.bucket)],
  );
}

/**
 * Hourly and daily rollups, upserted by the same statement as the usage rows (same transaction),
 * so cost reports over long windows read days and hours instead of requests.
 */
export const routerUsageHourly = rollupTable('router_usage_hourly', 'hour');
export const routerUsageDaily = rollupTable('router_usage_daily', 'day');

/**
 * What each API key spent per UTC day, upserted with the usage rows (same statement), so a key's
 * spent amount for its day, month or life is a read of at most a few hundred rows, whatever its traffic.
 * An organization's key's cost is also added under its member's budget id (`member:<org>:<user>`),
 * which the members' caps are bounded by.
 */
export const routerUsageKeyDaily = pgTable(
  'router_usage_key_daily',
  {
    day: timestamp('day', { withTimezone: true, mode: 'date' }).notNull(),
    keyId: text('key_id').notNull(),
    costMicros: bigint('cost_micros', { mode: 'bigint' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.day] })],
);

/**
 * API keys' spend-limit grants: the share of a key's remaining budget in its current period that
 * one serving process (holder) may admit requests against from memory, in the manner of the wallet
 * grants. A grant request locks the key (an advisory lock) and keeps committed spend plus the live
 * grants of the period within the limit; the usage commit lowers the holder's grant by what it
 * spent, in the transaction that adds the spend to router_usage_key_daily. A dead process's grants
 * lapse at expires_at; grants of an earlier period no longer count.
 */
export const keySpendGrants = pgTable(
  'key_spend_grants',
  {
    keyId: text('key_id').notNull(),
    /** The process holding the grant (a random id per process). */
    holder: text('holder').notNull(),
    /** Start of the period (UTC day or month, the epoch for `total`) the grant was given in. */
    periodStart: timestamp('period_start', { withTimezone: true, mode: 'date' }).notNull(),
    amountMicros: bigint('amount_micros', { mode: 'bigint' }).notNull(),
    /** The one grant of the key that may take it past its limit, by at most one request. */
    margin: boolean('margin').notNull(),
    /** Bumped by every change, so the holder applies answers in the order they happened. */
    version: bigint('version', { mode: 'number' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.holder] }), index('key_spend_grants_holder_idx').on(t.holder)],
);

/**
 * Usage rows the writer could not insert (a value the columns cannot hold, a refused debit), kept
 * whole with the reason so an operator can bill them by hand; they never block the other rows.
 */
export const routerUsageSetAside = pgTable('router_usage_set_aside', {
  id: text('id').primaryKey(),
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
  userId: text('user_id'),
  row: jsonb('row').notNull(),
  reason: text('reason').notNull(),
});

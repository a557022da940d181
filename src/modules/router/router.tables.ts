import { bigint, boolean, index, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

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
    /** Site currency micro-units. */
    costMicros: bigint('cost_micros', { mode: 'bigint' }).notNull(),
    currency: text('currency').notNull(),
    costUsdMicros: bigint('cost_usd_micros', { mode: 'bigint' }).notNull(),
    /** True when the prompt/completion counts came from our tokenizer, not the upstream. */
    tokensCounted: boolean('tokens_counted').notNull(),
    latencyMs: integer('latency_ms').notNull(),
    status: integer('status').notNull(),
    streamed: boolean('streamed').notNull(),
    aborted: boolean('aborted').notNull(),
    requestId: text('request_id'),
  },
  (t) => [index('router_usage_user_created_idx').on(t.userId, t.createdAt), index('router_usage_created_idx').on(t.createdAt)],
);

/**
 * Hourly rollup of router_usage per (user, model, entrypoint), upserted in the same transaction
 * as the usage rows, so cost reports over long windows read hours instead of requests.
 * user_id '' stands for no account (a primary key column cannot be null).
 */
export const routerUsageHourly = pgTable(
  'router_usage_hourly',
  {
    hour: timestamp('hour', { withTimezone: true, mode: 'date' }).notNull(),
    userId: text('user_id').notNull(),
    model: text('model').notNull(),
    entrypoint: text('entrypoint').notNull(),
    requests: bigint('requests', { mode: 'bigint' }).notNull(),
    tokens: bigint('tokens', { mode: 'bigint' }).notNull(),
    costMicros: bigint('cost_micros', { mode: 'bigint' }).notNull(),
    costUsdMicros: bigint('cost_usd_micros', { mode: 'bigint' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.hour, t.userId, t.model, t.entrypoint] }), index('router_usage_hourly_user_hour_idx').on(t.userId, t.hour)],
);

/** Daily rollup, same shape: a report over months reads days, the hourly rollup only at its edges. */
export const routerUsageDaily = pgTable(
  'router_usage_daily',
  {
    day: timestamp('day', { withTimezone: true, mode: 'date' }).notNull(),
    userId: text('user_id').notNull(),
    model: text('model').notNull(),
    entrypoint: text('entrypoint').notNull(),
    requests: bigint('requests', { mode: 'bigint' }).notNull(),
    tokens: bigint('tokens', { mode: 'bigint' }).notNull(),
    costMicros: bigint('cost_micros', { mode: 'bigint' }).notNull(),
    costUsdMicros: bigint('cost_usd_micros', { mode: 'bigint' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.day, t.userId, t.model, t.entrypoint] }), index('router_usage_daily_user_day_idx').on(t.userId, t.day)],
);

import { bigint, boolean, index, integer, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * One captured gateway request: its metadata here, its bodies (request as received, the answer)
 * sealed in the object store under `object_key`. Deleted with its object once `expires_at` passes.
 */
export const captures = pgTable(
  'captures',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    keyId: text('key_id'),
    /** chat | embeddings | responses | messages: the endpoint the request came to (a replay answers in its shape). */
    endpoint: text('endpoint').notNull(),
    /** What the caller asked for (`replay` for a replay), and the model that served it. */
    entrypoint: text('entrypoint').notNull(),
    model: text('model').notNull(),
    status: integer('status').notNull(),
    latencyMs: integer('latency_ms').notNull(),
    backend: text('backend'),
    usageId: text('usage_id'),
    streamed: boolean('streamed').notNull(),
    promptTokens: integer('prompt_tokens').notNull(),
    completionTokens: integer('completion_tokens').notNull(),
    costMicros: bigint('cost_micros', { mode: 'bigint' }).notNull(),
    /** A body was cut at the size limit (a capture whose request was cut cannot be replayed). */
    requestTruncated: boolean('request_truncated').notNull(),
    responseTruncated: boolean('response_truncated').notNull(),
    replayOf: text('replay_of'),
    objectKey: text('object_key').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('captures_user_idx').on(t.userId, t.createdAt, t.id), index('captures_created_idx').on(t.createdAt, t.id), index('captures_expires_idx').on(t.expiresAt)],
);

/** The admin's capture rules and retention: one row (`id` = 'settings'), absent until first set. */
export const captureSettings = pgTable('capture_settings', {
  id: text('id').primaryKey(),
  rules: jsonb('rules').$type<Array<{ user_id?: string; model?: string; sample: number }>>().notNull(),
  retentionDays: integer('retention_days').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
});

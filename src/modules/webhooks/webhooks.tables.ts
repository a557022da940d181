import { sql } from 'drizzle-orm';
import { boolean, check, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * A user's outbound webhook endpoint. The signing secret is kept sealed with SECRET_KEY
 * (platform/crypto's secretBox): the server must sign with it, so it cannot be a hash.
 * No foreign key to accounts' users: webhooks owns only its own tables (DESIGN §1).
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    url: text('url').notNull(),
    /** Event types sent to it (webhooks.events.ts EVENT_TYPES). */
    events: text('events').array().notNull(),
    secretSealed: text('secret_sealed').notNull(),
    enabled: boolean('enabled').notNull(),
    /** Why it was disabled by the server (deliveries failing for the whole retry window); null when by its owner or enabled. */
    disabledReason: text('disabled_reason'),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [index('webhook_endpoints_user_idx').on(t.userId, t.createdAt, t.id)],
);

/**
 * What happened, recorded in the transaction that made it happen (a payment credited, a refund
 * debited, an invoice issued). `dedupe_key` makes an event that may be noticed more than once
 * (a key reaching its spend limit: once per key and period) recorded once.
 */
export const webhookEvents = pgTable(
  'webhook_events',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    type: text('type').notNull(),
    data: jsonb('data').notNull(),
    dedupeKey: text('dedupe_key'),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [uniqueIndex('webhook_events_dedupe_key').on(t.dedupeKey), index('webhook_events_user_idx').on(t.userId, t.createdAt)],
);

/**
 * One event to one endpoint, and its delivery log. pending (waiting for `next_attempt_at`) →
 * delivered | failed (the retry window ran out). A worker claims a due row by moving
 * `next_attempt_at` past its attempt's timeout (SELECT … FOR UPDATE SKIP LOCKED), so one replica
 * attempts it per schedule, and a replica killed mid-attempt leaves it due again.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: text('id').primaryKey(),
    endpointId: text('endpoint_id').notNull(),
    eventId: text('event_id').notNull(),
    userId: text('user_id').notNull(),
    status: text('status').notNull(),
    attempts: integer('attempts').notNull(),
    nextAttemptAt: ts('next_attempt_at').notNull(),
    /** Start of its retry window (3 days): when the event happened, or the last manual retry or re-enabling. */
    windowStartedAt: ts('window_started_at').notNull(),
    lastAttemptAt: ts('last_attempt_at'),
    /** The last attempt's HTTP status (null: no answer), error in words, and duration. */
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    lastDurationMs: integer('last_duration_ms'),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_event_endpoint_key').on(t.eventId, t.endpointId),
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.createdAt, t.id),
    index('webhook_deliveries_due_idx').on(t.nextAttemptAt).where(sql`status = 'pending'`),
    check('webhook_deliveries_status_check', sql`${t.status} in ('pending', 'delivered', 'failed')`),
  ],
);

/** Every attempt of a delivery: when, what came back, how long it took. */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    id: text('id').primaryKey(),
    deliveryId: text('delivery_id').notNull(),
    attemptedAt: ts('attempted_at').notNull(),
    statusCode: integer('status_code'),
    error: text('error'),
    durationMs: integer('duration_ms').notNull(),
  },
  (t) => [index('webhook_attempts_delivery_idx').on(t.deliveryId, t.attemptedAt)],
);

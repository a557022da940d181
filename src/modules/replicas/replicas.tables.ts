import { pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * One row per running `cpd serve` on this site's PostgreSQL database: each heartbeats its row and
 * counts the rows seen lately, the replicas that share every rate limit. A handful of rows: no
 * index beyond the key.
 */
export const cpdReplicas = pgTable('cpd_replicas', {
  id: text('id').primaryKey(),
  startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }).notNull(),
  heartbeatAt: timestamp('heartbeat_at', { withTimezone: true, mode: 'date' }).notNull(),
});

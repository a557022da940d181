import { index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Every admin write, appended in the transaction of the write where the module allows it. The
 * migration adds a trigger refusing UPDATE and DELETE: the log cannot be edited through the app.
 */
export const auditLog = pgTable(
  'audit_log',
  {
    id: text('id').primaryKey(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    /** null when the shell did it (`cpd users …`, `cpd wallet adjust`): details.via says so. */
    actorId: text('actor_id'),
    actorEmail: text('actor_email'),
    /** `user.update`, `wallet.adjust`, `pricing.models`, … */
    action: text('action').notNull(),
    /** What was acted on: a user id, a payment id, a model slug, `pricing`. */
    target: text('target').notNull(),
    details: jsonb('details').notNull(),
  },
  // target, created_at, id: one organization's entries, newest first.
  (t) => [index('audit_log_created_idx').on(t.createdAt, t.id), index('audit_log_target_idx').on(t.target, t.createdAt, t.id)],
);

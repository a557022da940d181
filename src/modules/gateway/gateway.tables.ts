import { index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * A stored Responses API answer (`store`, the default): what GET /v1/responses/{id} returns and
 * what a later request's `previous_response_id` continues. A row holds its own request's input
 * items and output items; a chain is read by following `previous_response_id`. Its owner is the
 * key owner (user id); rows are deleted once `expires_at` passes.
 */
export const storedResponses = pgTable(
  'stored_responses',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    previousResponseId: text('previous_response_id'),
    /** The request's input as Responses items (a string input is one user message). */
    input: jsonb('input').$type<Record<string, unknown>[]>().notNull(),
    /** The response object as sent (its `output` is the output items). */
    response: jsonb('response').$type<Record<string, unknown>>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('stored_responses_expires_idx').on(t.expiresAt)],
);

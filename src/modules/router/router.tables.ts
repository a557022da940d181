import { boolean, integer, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

/**
 * The admin-managed backends (PUT /api/admin/router/backends replaces them all). The API key is
 * stored sealed (AES-256-GCM, key derived from SECRET_KEY) and never leaves the process in clear
 * except as the upstream's Authorization header.
 */
export const routerBackends = pgTable(
  'router_backends',
  {
    id: text('id').primaryKey(),
    model: text('model').notNull(),
    url: text('url').notNull(),
    apiKeySealed: text('api_key_sealed'),
    /** The protocol the backend speaks: openai (chat completions) or anthropic (Messages API). */
    format: text('format', { enum: ['openai', 'anthropic'] }).notNull().default('openai'),
    weight: integer('weight').notNull(),
    enabled: boolean('enabled').notNull(),
    position: integer('position').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [uniqueIndex('router_backends_model_url_key').on(t.model, t.url)],
);

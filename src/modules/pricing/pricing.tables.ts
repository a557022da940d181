import { bigint, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/** Per-model prices in micro-units of the site currency. */
export const modelPrices = pgTable('model_prices', {
  id: text('id').primaryKey(),
  slug: text('slug').notNull().unique(),
  unit: text('unit').notNull(),
  priceMicros: bigint('price_micros', { mode: 'bigint' }).notNull(),
  /** Per-million prices of prompt, completion and cached prompt tokens; null: `price` (cached: the input price). */
  inputPriceMicros: bigint('input_price_micros', { mode: 'bigint' }),
  outputPriceMicros: bigint('output_price_micros', { mode: 'bigint' }),
  cachedInputPriceMicros: bigint('cached_input_price_micros', { mode: 'bigint' }),
  position: integer('position').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
});

/** Per-GPU hourly prices in micro-units of the site currency. */
export const gpuPrices = pgTable('gpu_prices', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  hourlyPriceMicros: bigint('hourly_price_micros', { mode: 'bigint' }).notNull(),
  position: integer('position').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
});

/** Price groups: every gateway and agent cost of a member is multiplied by `multiplier` (ten-thousandths: 10000 = ×1). */
export const priceGroups = pgTable('price_groups', {
  name: text('name').primaryKey(),
  multiplierE4: integer('multiplier_e4').notNull(),
  description: text('description'),
  position: integer('position').notNull(),
});

/** A user's price group; a user without a row is in `default`. */
export const userPriceGroups = pgTable('user_price_groups', {
  // No foreign key to accounts' users: pricing owns only its own tables.
  userId: text('user_id').primaryKey(),
  groupName: text('group_name').notNull(),
});

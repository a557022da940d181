import { bigint, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/** Per-model prices in micro-units of the site currency. */
export const modelPrices = pgTable('model_prices', {
  id: text('id').primaryKey(),
  slug: text('slug').notNull().unique(),
  unit: text('unit').notNull(),
  priceMicros: bigint('price_micros', { mode: 'bigint' }).notNull(),
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

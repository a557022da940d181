/**
 * Migration 0020_market_pricing on a database that holds prices and usage from before it: every
 * price keeps its meaning (input and output at `price`, cached input at the input price), so a
 * request costs what it cost, and old usage rows read 0 cached and reasoning tokens.
 */
import { expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { costOf } from '../../../src/modules/metering';
import { migrate, openDatabase } from '../../../src/platform/db';
import { embeddedMigrations } from '../../../src/platform/db/migrations.generated';
import { createTestApp } from '../../support/app';
import { createEmptyPostgresDatabase } from '../../support/db';

test('the market pricing migration keeps every existing price meaning what it meant', async () => {
  const fresh = await createEmptyPostgresDatabase();
  const database = await openDatabase({ databaseUrl: fresh.url, maxConnections: 2 });
  try {
    const before = embeddedMigrations.filter((m) => m.name < '0020_market_pricing');
    expect(before.at(-1)?.name).toBe('0019_webhooks');
    await migrate(database, { migrations: before });
    await database.query(sql`insert into model_prices (id, slug, unit, price_micros, position) values
      ('mpr_old1', 'tokens', 'per_million_tokens', 1234567, 0), ('mpr_old2', 'image', 'per_request', 20000, 1)`);
    await database.query(sql`insert into router_usage (id, created_at, user_id, entrypoint, model, prompt_tokens, completion_tokens, cost_micros, currency, cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted)
      values ('use_old', now(), 'usr_old', 'tokens', 'tokens', 1000, 300, 1605, 'USD', 1605, false, 5, 200, false, false)`);
    expect(await migrate(database, { migrations: embeddedMigrations.filter((m) => m.name <= '0020_market_pricing') })).toEqual(['0020_market_pricing']);
    // The migrations after it change nothing this test reads; the app needs the whole schema.
    await migrate(database);

    const t = await createTestApp('postgres', {}, { testDb: { database, url: fresh.url, drop: async () => {} } });
    try {
      const tokens = t.services.pricing.priceOf('tokens')!;
      expect(tokens).toEqual({ unit: 'per_million_tokens', priceMicros: 1_234_567n, inputMicros: 1_234_567n, outputMicros: 1_234_567n, cachedInputMicros: 1_234_567n, multiplierE4: 10_000n });
      // (1000 + 300) × 1.234567 = 1604.9371 → 1605, as the old formula made it; cached tokens cost the input price.
      expect(costOf(tokens, 1000, 300)).toBe(1605n);
      expect(costOf(tokens, 1000, 300, 400)).toBe(1605n);
      expect(costOf(t.services.pricing.priceOf('image')!, 9, 9)).toBe(20_000n);
      expect((await t.request('GET', '/api/pricing')).body.models).toEqual([
        { id: 'mpr_old1', slug: 'tokens', unit: 'per_million_tokens', price: 1.234567, currency: 'USD' },
        { id: 'mpr_old2', slug: 'image', unit: 'per_request', price: 0.02, currency: 'USD' },
      ]);
      expect(await database.query(sql`select cached_tokens, reasoning_tokens from router_usage where id = 'use_old'`)).toEqual([{ cached_tokens: 0, reasoning_tokens: 0 }]);
    } finally {
      await t.close();
    }
  } finally {
    await database.close().catch(() => {});
    await fresh.drop();
  }
});

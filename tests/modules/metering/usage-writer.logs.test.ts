/**
 * The usage writer's failure log: a row PostgreSQL refuses (prompt_tokens overflowing its column)
 * is set aside and logged with its reason, while the batch it travelled in (one JSON parameter
 * holding every row) never reaches a log line: the good row beside it is written, and no line
 * carries its values, drizzle's "Failed query … params" text, or the overflowing value.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createBillingService } from '../../../src/modules/billing';
import { createUsageWriter } from '../../../src/modules/metering/metering.usage';
import { createTestContext, type TestContext } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { usageRecord } from '../../support/usage-record';

const row = (id: string, model: string, promptTokens: number) => usageRecord(id, promptTokens, model);

for (const kind of DB_KINDS) {
  describe(`usage writer failure log (${kind})`, () => {
    let tc: TestContext;
    beforeAll(async () => {
      tc = await createTestContext(kind);
    });
    afterAll(() => tc.close());

    test('a refused row: set aside with its reason; its batch and the good row beside it stay out of the logs', async () => {
      const writer = createUsageWriter(tc.ctx, createBillingService(tc.ctx), 'logs-test', () => {}, { consume: () => null, committed: () => {} }, { synchronousCommit: true });
      const first = writer.record(row('use_logfirst00001', 'first-model', 10));
      // Queued while the first batch is in flight: these two travel together in the next batch.
      const poison = writer.record(row('use_logpoison0001', 'poison-model', 3_000_000_000));
      const good = writer.record(row('use_loggoodrow001', 'good-row-value-that-must-not-leak', 31337));
      expect(await Promise.all([first, poison, good])).toEqual(['written', 'set_aside', 'written']);

      const setAside = tc.logs.filter((l) => l.includes('row set aside'));
      expect(setAside).toHaveLength(1);
      // The set-aside line holds its own row on purpose (to recover it by hand), and only that row.
      const logged = JSON.parse(setAside[0]!);
      expect(logged.row.id).toBe('use_logpoison0001');
      expect(logged.reason).toContain('out of range');
      expect(logged.reason).not.toContain('3000000000');
      for (const line of tc.logs) {
        for (const value of ['good-row-value-that-must-not-leak', 'use_loggoodrow001', '31337', 'Failed query', 'params:'])
          expect(line).not.toContain(value);
        if (line !== setAside[0]) expect(line).not.toContain('3000000000');
      }
      const written = await tc.ctx.database.query<{ id: string }>(sql`select id from router_usage order by id`);
      expect(written.map((r) => r.id)).toEqual(['use_logfirst00001', 'use_loggoodrow001']);
      const kept = await tc.ctx.database.query<{ id: string }>(sql`select id from router_usage_set_aside`);
      expect(kept.map((r) => r.id)).toEqual(['use_logpoison0001']);
    });
  });
}

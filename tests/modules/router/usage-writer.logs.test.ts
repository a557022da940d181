/**
 * The usage writer's retry log: a batch PostgreSQL refuses (a CHECK constraint no new usage row
 * passes, added NOT VALID) is logged with its SQLSTATE and constraint, never with the rows it
 * carried as the statement's parameter; once the database accepts it again, the row is written.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createBillingService } from '../../../src/modules/billing';
import { createUsageWriter, type UsageRecord } from '../../../src/modules/router/router.usage';
import { createTestContext, type TestContext } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { waitFor } from '../../support/wait';

for (const kind of DB_KINDS) {
  describe(`usage writer failure log (${kind})`, () => {
    let tc: TestContext;
    beforeAll(async () => {
      tc = await createTestContext(kind);
    });
    afterAll(() => tc.close());

    test('a refused batch: SQLSTATE and constraint logged, no row value; written once accepted', async () => {
      const writer = createUsageWriter(tc.ctx, createBillingService(tc.ctx), () => {});
      const record: UsageRecord = {
        id: 'use_logsecret0001',
        createdAt: new Date(),
        userId: null,
        keyId: null,
        entrypoint: 'chat',
        model: 'model-value-that-must-not-leak',
        backend: 'http://backend-value-that-must-not-leak.invalid',
        promptTokens: 31337,
        completionTokens: 1,
        costMicros: 0n,
        costUsdMicros: 0n,
        tokensCounted: true,
        latencyMs: 5,
        status: 200,
        streamed: false,
        aborted: false,
        requestId: 'request-value-that-must-not-leak',
      };
      await tc.ctx.database.query(sql.raw('alter table router_usage add constraint usage_refuse_new_rows check (false) not valid'));
      await writer.enqueue(record);
      const failed = () => tc.logs.filter((l) => l.includes('usage write failed'));
      await waitFor(() => failed().length > 0, 'the failed write to be logged');
      await tc.ctx.database.query(sql.raw('alter table router_usage drop constraint usage_refuse_new_rows'));
      await writer.flush();

      const [line] = failed();
      expect(JSON.parse(line!).err.cause).toMatchObject({ sqlstate: '23514', constraint: 'usage_refuse_new_rows', table: 'router_usage' });
      for (const value of [record.id, record.model, record.backend!, record.requestId!, '31337']) expect(line).not.toContain(value);
      const written = await tc.ctx.database.query<{ model: string }>(sql`select model from router_usage where id = ${record.id}`);
      expect(written).toEqual([{ model: record.model }]);
    });
  });
}

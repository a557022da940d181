/**
 * A usage row is never dropped: a row the database refuses goes to router_usage_set_aside; when
 * that insert is refused too, to the set-aside file (DATA_DIR/usage-set-aside/*.jsonl), which the
 * next start stores and then removes. On PostgreSQL and PGlite.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { createBillingService } from '../../../src/modules/billing';
import { createUsageWriter } from '../../../src/modules/metering/metering.usage';
import { createTestContext, type TestContext } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { usageRecord } from '../../support/usage-record';
import { waitFor } from '../../support/wait';

const row = (id: string, promptTokens: number) => usageRecord(id, promptTokens);

for (const kind of DB_KINDS) {
  describe(`the set-aside file (${kind})`, () => {
    let tc: TestContext;
    beforeAll(async () => {
      tc = await createTestContext(kind);
    });
    afterAll(() => tc.close());

    const writerOf = () => createUsageWriter(tc.ctx, createBillingService(tc.ctx), 'set-aside-test', () => {}, { consume: () => null, committed: () => {} }, { synchronousCommit: true });
    const files = () => {
      try {
        return readdirSync(join(tc.dataDir, 'usage-set-aside')).filter((n) => n.endsWith('.jsonl'));
      } catch {
        return [];
      }
    };
    const setAsideIds = async () => (await tc.ctx.database.query<{ id: string }>(sql`select id from router_usage_set_aside order by id`)).map((r) => r.id);

    test('a refused row whose set-aside insert is refused too is kept in the file; the next start stores it once and removes the file', async () => {
      const first = writerOf();
      expect(await first.record(row('use_setasidegood01', 10))).toBe('written');
      await tc.ctx.database.query(sql`alter table router_usage_set_aside add constraint refuse_all check (false) not valid`);
      try {
        // prompt_tokens overflows its column: refused for good, then refused by router_usage_set_aside.
        expect(await first.record(row('use_setasidepoison', 3_000_000_000))).toBe('set_aside');
        expect(files()).toHaveLength(1);
        expect(await setAsideIds()).toEqual([]);
        await first.close(1_000);
        // Its rows could not be stored before the writer closed: the file stays for the next start.
        expect(files()).toHaveLength(1);
        expect(tc.logs.some((l) => l.includes('usage set-aside journal: rows not written are kept for the next start'))).toBe(true);
      } finally {
        await tc.ctx.database.query(sql`alter table router_usage_set_aside drop constraint refuse_all`);
      }
      // The next start on this DATA_DIR.
      const next = writerOf();
      await waitFor(() => files().length === 0, 'the set-aside file to be stored and removed');
      await next.close(1_000);
      expect(await setAsideIds()).toEqual(['use_setasidepoison']);
      const [kept] = await tc.ctx.database.query<{ reason: string; prompt_tokens: string }>(
        sql`select reason, row->>'prompt_tokens' as prompt_tokens from router_usage_set_aside where id = 'use_setasidepoison'`,
      );
      expect(kept!.reason).toContain('out of range');
      expect(kept!.prompt_tokens).toBe('3000000000');
      // Nothing of it was written as usage.
      expect((await tc.ctx.database.query(sql`select id from router_usage where id = 'use_setasidepoison'`)).length).toBe(0);
    });
  });
}

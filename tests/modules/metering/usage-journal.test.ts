/**
 * The usage journal's lines as the usage writer reads them back: a journal left by a process that
 * is gone is billed by the next writer on its directory, whether its lines are the wire form (one
 * letter per column) or the column names a journal written before the wire form kept. The insert
 * cuts each row's hour and day from its UTC time for the rollups.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { createBillingService } from '../../../src/modules/billing';
import { createUsageWriter } from '../../../src/modules/metering/metering.usage';
import { createTestContext, type TestContext } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { waitFor } from '../../support/wait';

/** A row in a journal written before the wire form: router_usage's column names. */
const columnsLine = {
  id: 'use_0journalcolumns00000001',
  created_at: '2026-11-27T10:59:59.999Z',
  user_id: 'usr_journal',
  key_id: 'key_journal',
  entrypoint: 'auto',
  model: 'small',
  backend: 'http://small.invalid/v1',
  prompt_tokens: 30,
  completion_tokens: 12,
  cost_micros: '4200',
  cost_usd_micros: '4200',
  tokens_counted: false,
  latency_ms: 17,
  status: 200,
  streamed: true,
  aborted: false,
  request_id: 'req-columns',
};

/** The same kind of row in the wire form, one millisecond past the hour. */
const wireLine = {
  i: 'use_0journalwire00000000002',
  t: '2026-11-27T11:00:00.001Z',
  u: 'usr_journal',
  k: null,
  e: 'small',
  m: 'small',
  b: null,
  p: 5,
  c: 7,
  x: '1200',
  y: '1200',
  n: true,
  l: 3,
  s: 200,
  r: false,
  a: true,
  q: null,
};

for (const kind of DB_KINDS) {
  describe(`usage journal lines (${kind})`, () => {
    let tc: TestContext;
    beforeAll(async () => {
      tc = await createTestContext(kind);
    });
    afterAll(() => tc.close());

    test('a journal left behind is billed, in the wire form and in the column names of a journal written before it', async () => {
      const dir = join(tc.ctx.config.dataDir, 'journal', 'usage');
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, '1700000000000-0000000000000abc.jsonl'), `${JSON.stringify(columnsLine)}\n${JSON.stringify(wireLine)}\n`);
      const writer = createUsageWriter(tc.ctx, createBillingService(tc.ctx), 'journal-test', () => {}, { consume: () => null, committed: () => {} }, { synchronousCommit: true, journalDir: dir });
      try {
        await waitFor(() => readdirSync(dir).length === 0, 'the adopted journal to be written and deleted');

        const rows = await tc.ctx.database.query<Record<string, unknown>>(
          sql`select id, created_at, user_id, key_id, entrypoint, model, backend, prompt_tokens, completion_tokens, cost_micros::text as cost_micros,
                cost_usd_micros::text as cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted, request_id
              from router_usage order by id`,
        );
        const asStored: Array<Record<string, unknown>> = rows.map((r) => ({ ...r, created_at: new Date(r.created_at as string).toISOString() }));
        // Each row as its line said: the column names' line stored as it was written.
        expect(asStored).toEqual([
          columnsLine,
          {
            id: wireLine.i,
            created_at: wireLine.t,
            user_id: 'usr_journal',
            key_id: null,
            entrypoint: 'small',
            model: 'small',
            backend: null,
            prompt_tokens: 5,
            completion_tokens: 7,
            cost_micros: '1200',
            cost_usd_micros: '1200',
            tokens_counted: true,
            latency_ms: 3,
            status: 200,
            streamed: false,
            aborted: true,
            request_id: null,
          },
        ]);

        // The hour and day cut from each row's UTC time: the two rows fall in two hours of one day.
        const hourly = await tc.ctx.database.query<{ hour: string; entrypoint: string; requests: number; tokens: number; cost: string }>(
          sql`select hour, entrypoint, requests::int as requests, tokens::int as tokens, cost_micros::text as cost from router_usage_hourly order by hour`,
        );
        expect(hourly.map((h) => ({ ...h, hour: new Date(h.hour).toISOString() }))).toEqual([
          { hour: '2026-11-27T10:00:00.000Z', entrypoint: 'auto', requests: 1, tokens: 42, cost: '4200' },
          { hour: '2026-11-27T11:00:00.000Z', entrypoint: 'small', requests: 1, tokens: 12, cost: '1200' },
        ]);
        const daily = await tc.ctx.database.query<{ day: string; requests: number; cost: string }>(
          sql`select day, sum(requests)::int as requests, sum(cost_micros)::text as cost from router_usage_daily group by day`,
        );
        expect(daily.map((d) => ({ ...d, day: new Date(d.day).toISOString() }))).toEqual([{ day: '2026-11-27T00:00:00.000Z', requests: 2, cost: '5400' }]);
        const keyDaily = await tc.ctx.database.query<{ key_id: string; cost: string }>(sql`select key_id, cost_micros::text as cost from router_usage_key_daily`);
        expect(keyDaily).toEqual([{ key_id: 'key_journal', cost: '4200' }]);

        // Each row's debit: one usage entry apiece, and the wallet equal to their sum.
        const entries = await tc.ctx.database.query<{ reference: string; amount: string }>(
          sql`select reference, amount_micros::text as amount from wallet_transactions where user_id = 'usr_journal' order by reference`,
        );
        expect(entries).toEqual([
          { reference: `usage:${columnsLine.id}`, amount: '-4200' },
          { reference: `usage:${wireLine.i}`, amount: '-1200' },
        ]);
        const [wallet] = await tc.ctx.database.query<{ balance: string }>(sql`select balance_micros::text as balance from wallets where user_id = 'usr_journal'`);
        expect(wallet?.balance).toBe('-5400');
      } finally {
        await writer.close(5_000);
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

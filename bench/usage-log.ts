/**
 * The usage log at a million router_usage rows: GET /api/usage pages and the CSV export through the
 * real app, against baselines measured in the same run on the same data:
 *  - the first page without the (user_id, created_at, id) index (the planner's other choices);
 *  - a deep page by cursor against the same page by OFFSET;
 *  - the streamed CSV export against reading the whole range in one query;
 *  - what the key_id index costs an insert of usage rows (with and without it).
 * It also prints EXPLAIN for the page query, showing the index serving filter, order and cursor.
 *
 *   bun bench/usage-log.ts      (ROWS=1000000 SHARE=50: the measured user has every 50th row, the
 *                                rest belong to 1000 other accounts)
 */
import { sql } from 'drizzle-orm';
import { createTestApp } from '../tests/support/app';
import { makeApiKey, makeUser } from '../tests/support/make';

const ROWS = Number(process.env.ROWS ?? 1_000_000);
const SHARE = Number(process.env.SHARE ?? 50);
const RUNS = 7;

const t = await createTestApp('postgres', { LOG_LEVEL: 'warn' });
const heavy = await makeUser(t);
const key = await makeApiKey(t, heavy.id);
const q = <T = Record<string, unknown>>(s: ReturnType<typeof sql>) => t.ctx.database.query<T>(s);

let t0 = performance.now();
await q(sql`
  insert into router_usage (id, created_at, user_id, key_id, entrypoint, model, backend, prompt_tokens, completion_tokens,
    cost_micros, currency, cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted, request_id)
  select 'use_bench_' || lpad(i::text, 8, '0'), now() - (i % (90 * 24 * 3600)) * interval '1 second',
    case when i % ${SHARE} = 0 then ${heavy.id} else 'usr_bench_' || (i % 1000) end,
    case when i % (7 * ${SHARE}) = 0 then ${key.id} else 'key_other_' || (i % 7000) end,
    (array['auto', 'm1', 'm2', 'cheap'])[1 + i % 4], (array['m1', 'm2', 'm3'])[1 + i % 3], null,
    100 + i % 50, 20 + i % 30, 120 + i % 80, 'USD', 120 + i % 80, false, 50, 200, i % 2 = 0, false, null
  from generate_series(1, ${ROWS}) as i`);
await q(sql`analyze router_usage`);
const [{ n: own } = { n: 0 }] = await q<{ n: number }>(sql`select count(*)::int as n from router_usage where user_id = ${heavy.id}`);
console.log(`seeded ${ROWS} usage rows (${own} of them the measured user's) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

async function median(fn: () => Promise<unknown>) {
  const xs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    t0 = performance.now();
    await fn();
    xs.push(performance.now() - t0);
  }
  return xs.sort((a, b) => a - b)[Math.floor(RUNS / 2)]!;
}

async function page(query: string) {
  const r = await t.request('GET', `/api/usage?${query}`, { token: heavy.token });
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
  return r.body as { usage: Array<{ id: string }>; next_cursor: string | null };
}

/** The page query as the endpoint runs it, for EXPLAIN and for the no-index baseline. */
const pageSql = (extra = '') =>
  sql.raw(`select * from router_usage where user_id = '${heavy.id}'${extra} order by created_at desc, id desc limit 51`);
/** The same query with index scans turned off for one transaction: what it costs without the index. */
const withoutIndex = (s: ReturnType<typeof sql.raw>) =>
  t.ctx.database.db.transaction(async (tx) => {
    await tx.execute(sql`set local enable_indexscan = off`);
    await tx.execute(sql`set local enable_bitmapscan = off`);
    await tx.execute(s);
  });

for (const [name, extra] of [
  ['page 1', ''],
  ['page 1, key_id filter', ` and key_id = '${key.id}'`],
  ['page 1, model filter', ` and model = 'm2'`],
] as const) {
  const plan = await q<{ 'QUERY PLAN': string }>(sql`explain (analyze, costs off, timing off, summary off) ${pageSql(extra)}`);
  console.log(`EXPLAIN ${name}:\n  ${plan.map((r) => r['QUERY PLAN']).join('\n  ')}`);
}

// Page 1, unfiltered and filtered.
for (const [name, query, extra] of [
  ['page 1 (limit=50)', 'limit=50', ''],
  ['page 1, key_id', `limit=50&key_id=${key.id}`, ` and key_id = '${key.id}'`],
  ['page 1, model=m2', 'limit=50&model=m2', ` and model = 'm2'`],
  ['page 1, model=m2&key_id', `limit=50&model=m2&key_id=${key.id}`, ` and model = 'm2' and key_id = '${key.id}'`],
] as const) {
  const a = await median(() => page(query));
  const b = await median(() => withoutIndex(pageSql(extra)));
  console.log(`${name}: endpoint ${a.toFixed(1)} ms (HTTP, index) vs the same SQL without the index ${b.toFixed(1)} ms: ${(b / a).toFixed(1)}× faster`);
}

// A deep page: walk DEPTH rows by cursor once, then time the next page by cursor vs by OFFSET.
const DEPTH = Math.floor(own / 2);
let cursor: string | null = null;
for (let seen = 0; seen < DEPTH; seen += 200) cursor = (await page(`limit=200${cursor ? `&cursor=${cursor}` : ''}`)).next_cursor;
const deep = await median(() => page(`limit=50&cursor=${cursor}`));
const offset = await median(() => q(sql.raw(`select * from router_usage where user_id = '${heavy.id}' order by created_at desc, id desc limit 50 offset ${DEPTH}`)));
console.log(`page after ${DEPTH} rows: endpoint by cursor ${deep.toFixed(1)} ms vs the same page by OFFSET ${offset.toFixed(1)} ms: ${(offset / deep).toFixed(1)}× faster`);

// The CSV export of all the user's rows, streamed page by page, against one query that loads them all.
let lines = 0;
t0 = performance.now();
const res = await t.app.handle(new Request('http://localhost/api/usage/export.csv', { headers: { authorization: `Bearer ${heavy.token}` } }));
const decoder = new TextDecoder();
for await (const chunk of res.body!) lines += (decoder.decode(chunk, { stream: true }).match(/\r\n/g) ?? []).length;
const streamed = performance.now() - t0;
const loadAll = await median(() => q(sql.raw(`select * from router_usage where user_id = '${heavy.id}' order by created_at desc, id desc`)));
console.log(
  `CSV export of ${lines - 1} rows: streamed in pages of 1000 ${streamed.toFixed(0)} ms (${(((lines - 1) / streamed) * 1000).toFixed(0)} rows/s, HTTP and CSV included) ` +
    `vs one query loading the whole range ${loadAll.toFixed(0)} ms: ${(streamed / loadAll).toFixed(1)}× the time, one page in memory instead of ${lines - 1} rows`,
);
if (lines - 1 !== own) throw new Error(`export wrote ${lines - 1} rows, expected ${own}`);

// What the key filter's index costs the writer: the same batch of rows inserted with and without it.
const BATCH = 20_000;
let batchNo = 0;
const insertBatch = () =>
  q(sql.raw(`insert into router_usage (id, created_at, user_id, key_id, entrypoint, model, prompt_tokens, completion_tokens, cost_micros, currency,
               cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted)
             select 'use_w${++batchNo}_' || i, now(), 'usr_bench_' || (i % 1000), 'key_w_' || (i % 3000), 'm1', 'm1',
                    10, 10, 10, 'USD', 10, false, 5, 200, false, false
             from generate_series(1, ${BATCH}) as i`));
const withKeyIndex = await median(insertBatch);
await q(sql`drop index router_usage_user_key_created_id_idx`);
const withoutKeyIndex = await median(insertBatch);
console.log(`writer cost: ${BATCH} rows in one insert ${withKeyIndex.toFixed(0)} ms with the key_id index vs ${withoutKeyIndex.toFixed(0)} ms without: ${(withKeyIndex / withoutKeyIndex).toFixed(2)}× the time`);

await t.close();
process.exit(0);

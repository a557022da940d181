/**
 * Router cost report at a million usage rows (issue 7): GET /v1/router/cost through the real app
 * (daily rollup for whole days, hourly at the edges, raw rows for the partial hours) against the naive aggregate over
 * router_usage alone, on a PostgreSQL test database, in one run.
 *
 *   bun bench/router-cost.ts      (ROWS=1000000 USERS=1000)
 */
import { sql } from 'drizzle-orm';
import { createTestApp } from '../tests/support/app';
import { makeUser } from '../tests/support/make';

const ROWS = Number(process.env.ROWS ?? 1_000_000);
const USERS = Number(process.env.USERS ?? 1000);
const RUNS = 7;

const t = await createTestApp('postgres', { LOG_LEVEL: 'warn' });
const admin = await makeUser(t, { admin: true });
const one = await makeUser(t);
const q = (s: ReturnType<typeof sql>) => t.ctx.database.query(s);

let t0 = performance.now();
// Rows spread over the last 30 days; user 0 is a real account so the own-scope query has data.
await q(sql`
  insert into router_usage (id, created_at, user_id, key_id, entrypoint, model, backend, prompt_tokens, completion_tokens,
    cost_micros, currency, cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted, request_id)
  select 'use_bench_' || i, now() - (i % (30 * 24 * 3600)) * interval '1 second',
    case when i % ${USERS} = 0 then ${one.id} else 'usr_bench_' || (i % ${USERS}) end, null,
    (array['auto', 'm1', 'm2', 'cheap'])[1 + i % 4], (array['m1', 'm2', 'm3'])[1 + i % 3], null,
    100 + i % 50, 20 + i % 30, 120 + i % 80, 'USD', 120 + i % 80, false, 50, 200, i % 2 = 0, false, null
  from generate_series(1, ${ROWS}) as i`);
await q(sql`
  insert into router_usage_hourly (hour, user_id, model, entrypoint, requests, tokens, cost_micros, cost_usd_micros)
  select date_trunc('hour', created_at at time zone 'UTC') at time zone 'UTC', coalesce(user_id, ''), model, entrypoint,
         count(*), sum(prompt_tokens + completion_tokens), sum(cost_micros), sum(cost_usd_micros)
  from router_usage group by 1, 2, 3, 4`);
await q(sql`
  insert into router_usage_daily (day, user_id, model, entrypoint, requests, tokens, cost_micros, cost_usd_micros)
  select date_trunc('day', hour at time zone 'UTC') at time zone 'UTC', user_id, model, entrypoint,
         sum(requests), sum(tokens), sum(cost_micros), sum(cost_usd_micros)
  from router_usage_hourly group by 1, 2, 3, 4`);
await q(sql`analyze router_usage_daily`);
await q(sql`analyze router_usage`);
await q(sql`analyze router_usage_hourly`);
console.log(`seeded ${ROWS} usage rows for ${USERS} users in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

async function median(fn: () => Promise<unknown>) {
  const xs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    t0 = performance.now();
    await fn();
    xs.push(performance.now() - t0);
  }
  return xs.sort((a, b) => a - b)[Math.floor(RUNS / 2)]!;
}

async function endpoint(token: string, query: string) {
  const r = await t.request('GET', `/v1/router/cost?${query}`, { token });
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
  return r.body.items.length as number;
}

const naive = (own: string | null, groups: string) =>
  q(sql.raw(`select ${groups ? `${groups}, ` : ''}sum(prompt_tokens + completion_tokens), sum(cost_usd_micros) from router_usage
             where created_at >= now() - interval '30 days' ${own ? `and user_id = '${own}'` : ''} ${groups ? `group by ${groups}` : ''}`));

const cases: Array<[string, () => Promise<unknown>, () => Promise<unknown>]> = [
  ['admin, 30 days, group_by=user,model,entrypoint', () => endpoint(admin.token, 'group_by=user,model,entrypoint'), () => naive(null, 'user_id, model, entrypoint')],
  ['admin, 30 days, group_by=model', () => endpoint(admin.token, 'group_by=model'), () => naive(null, 'model')],
  ['own usage, 30 days, group_by=model,entrypoint', () => endpoint(one.token, 'group_by=model,entrypoint'), () => naive(one.id, 'model, entrypoint')],
];
for (const [name, report, baseline] of cases) {
  const a = await median(report);
  const b = await median(baseline);
  console.log(`${name}: endpoint ${a.toFixed(1)} ms (HTTP, rollups) vs naive SQL over router_usage ${b.toFixed(1)} ms: ${(b / a).toFixed(1)}× faster`);
}
await t.close();
process.exit(0);

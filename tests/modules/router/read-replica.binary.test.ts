import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { TEST_SECRET } from '../../support/app';
import { BINARY_PATH, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';

/**
 * DATABASE_READ_URL on the binary: a second database stands in for the read replica and holds a
 * usage row the primary lacks, so the reports can only show it if they read the replica. A second
 * process without the variable, on the same primary, shows the primary's (empty) usage instead.
 */
describe('reports on a read replica (DATABASE_READ_URL)', () => {
  let primary: TestDatabase;
  let replica: TestDatabase;
  let withReplica: RunningBinary;
  let primaryOnly: RunningBinary;
  let token = '';
  const rowId = 'usage_on_the_replica_only';

  beforeAll(async () => {
    [primary, replica] = await Promise.all([createTestDatabase('postgres'), createTestDatabase('postgres')]);
    const env = { DATABASE_URL: primary.url!, SECRET_KEY: TEST_SECRET };
    [withReplica, primaryOnly] = await Promise.all([
      startBinary({ env: { ...env, DATABASE_READ_URL: replica.url! } }),
      startBinary({ env }),
    ]);
    const reg = await fetch(`${withReplica.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'reports@example.com', password: 'read from the replica' }),
    });
    expect(reg.status).toBe(201);
    token = ((await reg.json()) as { token: string }).token;
    const me = (await (await fetch(`${withReplica.url}/api/auth/me`, { headers: { authorization: `Bearer ${token}` } })).json()) as { id: string };
    const sql = postgres(replica.url!, { max: 1, onnotice: () => {} });
    await sql`insert into router_usage (id, created_at, user_id, key_id, entrypoint, model, backend, prompt_tokens, completion_tokens,
      cost_micros, currency, cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted)
      values (${rowId}, now(), ${me.id}, null, 'replica-model', 'replica-model', null, 7, 5,
      1234, 'USD', 1234, false, 12, 200, false, false)`;
    // Its hourly and daily rollups too, as the usage writer adds them: the cost report reads whole
    // hours and days from them, and the row's hour may be whole by the time the report runs.
    for (const [table, bucket] of [['router_usage_hourly', 'hour'], ['router_usage_daily', 'day']] as const) {
      await sql.unsafe(
        `insert into ${table} (${bucket}, user_id, model, entrypoint, requests, tokens, cost_micros, cost_usd_micros)
         values (date_trunc('${bucket}', now() at time zone 'UTC') at time zone 'UTC', $1, 'replica-model', 'replica-model', 1, 12, 1234, 1234)`,
        [me.id],
      );
    }
    await sql.end();
  }, 180_000);

  afterAll(async () => {
    await Promise.all([withReplica?.stop(), primaryOnly?.stop()]);
    await Promise.all([primary?.drop(), replica?.drop()]);
  });

  const get = (server: RunningBinary, path: string) => fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } });

  test('the usage log reads the replica; without DATABASE_READ_URL it reads the primary', async () => {
    const fromReplica = (await (await get(withReplica, '/api/usage')).json()) as { usage: Array<{ id: string; cost: number }> };
    expect(fromReplica.usage.map((u) => u.id)).toEqual([rowId]);
    expect(fromReplica.usage[0]!.cost).toBe(0.001234);
    const fromPrimary = (await (await get(primaryOnly, '/api/usage')).json()) as { usage: unknown[] };
    expect(fromPrimary.usage).toEqual([]);
  });

  test('the CSV export reads the replica', async () => {
    const res = await get(withReplica, '/api/usage/export.csv');
    expect(res.status).toBe(200);
    const lines = (await res.text()).trim().split('\r\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toStartWith(`${rowId},`);
    expect((await (await get(primaryOnly, '/api/usage/export.csv')).text()).trim().split('\r\n')).toHaveLength(1);
  });

  test('the cost report reads the replica', async () => {
    const cost = (await (await get(withReplica, '/v1/router/cost?group_by=model')).json()) as { items: Array<{ model: string; tokens: number; cost_usd: number }> };
    expect(cost.items).toEqual([{ model: 'replica-model', tokens: 12, cost_usd: 0.001234 }]);
    const onPrimary = (await (await get(primaryOnly, '/v1/router/cost?group_by=model')).json()) as { items: unknown[] };
    expect(onPrimary.items).toEqual([]);
  });

  test('writes still go to the primary: the account made through the replica-reading process exists there', async () => {
    const res = await get(primaryOnly, '/api/auth/me');
    expect(res.status).toBe(200);
  });

  test('DATABASE_READ_URL without DATABASE_URL is refused at start with the variable named', async () => {
    const proc = Bun.spawn([BINARY_PATH, 'serve'], {
      env: { PATH: process.env.PATH ?? '', DATABASE_READ_URL: replica.url!, HOST: '127.0.0.1', PORT: '0' },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(code).toBe(2);
    expect(err).toContain('DATABASE_READ_URL');
  });
});

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeApiKey, makeUser } from '../../support/make';
import { fundedUser, type Harness, startHarness } from '../gateway/gateway-harness';

/** Parses CSV with Python's csv module (a real RFC 4180 reader, not ours). */
function parseCsv(text: string): string[][] {
  const r = Bun.spawnSync(['python3', '-c', 'import csv,sys,json; print(json.dumps(list(csv.reader(sys.stdin, strict=True))))'], { stdin: Buffer.from(text) });
  if (r.exitCode !== 0) throw new Error(r.stderr.toString());
  return JSON.parse(r.stdout.toString());
}

const HEADER = ['id', 'created_at', 'entrypoint', 'model', 'key_id', 'prompt_tokens', 'completion_tokens', 'cost', 'currency', 'status', 'streamed', 'latency_ms', 'clamped', 'cached_tokens', 'reasoning_tokens'];

describe('usage log: real requests through the openai client (postgres)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { ROUTES: 'auto=fallback:m1' } });
    await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 2 }]);
  });
  afterAll(() => h.close());

  test('each request is a row, newest first, with its key and cost; session or key; filters by key and model; CSV the same', async () => {
    const u = await fundedUser(h, 10_000_000n);
    const second = await makeApiKey(h.t, u.user.id, 'second');
    await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'one' }] });
    await u.client.chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: 'two' }] });
    const stream = await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'three' }], stream: true });
    for await (const _ of stream);
    const res2 = await fetch(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${second.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'four' }] }),
    });
    expect(res2.status).toBe(200);
    await res2.arrayBuffer();
    await h.t.services.router.flushUsage();

    const bySession = await h.t.request('GET', '/api/usage', { token: u.user.token });
    expect(bySession.status).toBe(200);
    const rows = bySession.body.usage;
    expect(rows).toHaveLength(4);
    expect(rows.map((r: { key_id: string }) => r.key_id)).toEqual([second.id, u.key.id, u.key.id, u.key.id]);
    expect(rows.map((r: { streamed: boolean }) => r.streamed)).toEqual([false, true, false, false]);
    expect(rows.map((r: { entrypoint: string }) => r.entrypoint)).toEqual(['m1', 'm1', 'auto', 'm1']);
    expect(rows[0]).toEqual({
      id: expect.any(String),
      created_at: expect.any(String),
      entrypoint: 'm1',
      model: 'm1',
      key_id: second.id,
      key_name: 'second',
      key_revoked: false,
      prompt_tokens: expect.any(Number),
      completion_tokens: expect.any(Number),
      cost: expect.any(Number),
      currency: 'USD',
      status: 200,
      streamed: false,
      latency_ms: expect.any(Number),
      clamped: false,
      cached_tokens: 0,
      reasoning_tokens: 0,
    });
    const total = rows.reduce((s: number, r: { cost: number }) => s + Math.round(r.cost * 1e6), 0);
    expect(BigInt(total)).toBe(10_000_000n - (await u.balance()));

    const byKey = await h.t.request('GET', '/api/usage', { token: u.key.key });
    expect(byKey.body).toEqual(bySession.body);
    expect((await h.t.request('GET', `/api/usage?key_id=${second.id}`, { token: u.user.token })).body.usage).toEqual([rows[0]]);
    expect((await h.t.request('GET', '/api/usage?model=nope', { token: u.user.token })).body.usage).toEqual([]);

    // A revoked key's usage keeps the key's name (the console's list of keys no longer has it).
    expect((await h.t.request('DELETE', `/api/api-keys/${second.id}`, { token: u.user.token })).status).toBe(204);
    expect((await h.t.request('GET', `/api/usage?key_id=${second.id}`, { token: u.user.token })).body.usage).toEqual([
      { ...rows[0], key_name: 'second', key_revoked: true },
    ]);

    const csv = await fetch(`${h.baseUrl}/api/usage/export.csv`, { headers: { authorization: `Bearer ${u.key.key}` } });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const table = parseCsv(await csv.text());
    expect(table[0]).toEqual(HEADER);
    expect(table.slice(1).map((r) => r[0])).toEqual(rows.map((r: { id: string }) => r.id));
    expect(table[1]).toEqual(HEADER.map((c) => (rows[0][c] === null ? '' : String(rows[0][c]))));

    const other = await fundedUser(h, 0n);
    expect((await h.t.request('GET', '/api/usage', { token: other.user.token })).body).toEqual({ usage: [], next_cursor: null });
    expect((await h.t.request('GET', '/api/usage')).status).toBe(401);
    expect((await h.t.request('GET', '/api/usage/export.csv')).status).toBe(401);
  });
});

for (const kind of DB_KINDS) {
  describe(`usage log pages and export (${kind})`, () => {
    let t: TestApp;
    let user: Awaited<ReturnType<typeof makeUser>>;
    let neighbour: Awaited<ReturnType<typeof makeUser>>;
    const base = Date.parse('2026-03-01T00:00:00Z');
    const ROWS = 2_345;
    beforeAll(async () => {
      t = await createTestApp(kind);
      user = await makeUser(t);
      neighbour = await makeUser(t);
      // Rows as the router writes them; pairs share a timestamp so the id orders them.
      await t.ctx.database.query(sql`
        insert into router_usage (id, created_at, user_id, key_id, entrypoint, model, prompt_tokens, completion_tokens, cost_micros, currency,
                                  cost_usd_micros, tokens_counted, latency_ms, status, streamed, aborted)
        select 'use_' || lpad(i::text, 6, '0'), ${new Date(base).toISOString()}::timestamptz + (i / 2) * interval '1 second',
               case when i % 10 = 9 then ${neighbour.id} else ${user.id} end,
               case when i % 3 = 0 then 'key_a' else 'key_b' end, case when i % 4 = 0 then 'auto' else 'm1' end,
               case when i % 5 = 0 then 'big, "quoted"' else 'm1' end, i, 2 * i, i * 7, 'USD', i * 7, false, i % 1000, 200, i % 2 = 0, false
        from generate_series(1, ${ROWS}) as i`);
    });
    afterAll(() => t.close());

    const own = Array.from({ length: ROWS }, (_, k) => k + 1).filter((i) => i % 10 !== 9);
    const idOf = (i: number) => `use_${String(i).padStart(6, '0')}`;

    test('cursor pages walk every own row exactly once, newest first (ties by id), never a neighbour row', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res: { status: number; body: any } = await t.request('GET', `/api/usage?limit=200${cursor ? `&cursor=${cursor}` : ''}`, { token: user.token });
        expect(res.status).toBe(200);
        seen.push(...res.body.usage.map((r: { id: string }) => r.id));
        cursor = res.body.next_cursor;
      } while (cursor);
      expect(seen).toEqual(own.map(idOf).reverse());
    });

    test('from (inclusive), to (exclusive), model and key_id filter; limit/cursor/time errors are 400', async () => {
      const from = new Date(base + 100_000).toISOString(); // rows 200, 201 and later
      const to = new Date(base + 110_000).toISOString(); // before row 220
      const res = await t.request('GET', `/api/usage?from=${from}&to=${to}&limit=200`, { token: user.token });
      const expected = own.filter((i) => i >= 200 && i < 220);
      expect(res.body.usage.map((r: { id: string }) => r.id)).toEqual(expected.map(idOf).reverse());
      const filtered = await t.request('GET', `/api/usage?from=${from}&to=${to}&model=${encodeURIComponent('big, "quoted"')}&key_id=key_a`, { token: user.token });
      expect(filtered.body.usage.map((r: { id: string }) => r.id)).toEqual(expected.filter((i) => i % 5 === 0 && i % 3 === 0).map(idOf).reverse());
      for (const q of ['limit=0', 'limit=201', 'cursor=%7B', 'cursor=WyJ4Il0', 'from=yesterday', `from=${to}&to=${from}`, 'to=2026-13-45'])
        expect({ q, status: (await t.request('GET', `/api/usage?${q}`, { token: user.token })).status }).toEqual({ q, status: 400 });
    });

    test('the CSV export streams every own row in the range, RFC 4180 quoted; a bad range is a 400 JSON error', async () => {
      const res = await t.request('GET', '/api/usage/export.csv', { token: user.token });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-disposition')).toContain('attachment');
      expect(res.text.endsWith('\r\n')).toBe(true);
      const table = parseCsv(res.text);
      expect(table[0]).toEqual(HEADER);
      expect(table.slice(1).map((r) => r[0])).toEqual(own.map(idOf).reverse());
      const quoted = table.find((r) => r[0] === idOf(10))!;
      expect(quoted).toEqual([idOf(10), new Date(base + 5_000).toISOString(), 'm1', 'big, "quoted"', 'key_b', '10', '20', '0.00007', 'USD', '200', 'true', '10', 'false', '0', '0']);

      const ranged = parseCsv((await t.request('GET', `/api/usage/export.csv?from=${new Date(base + 1_000_000).toISOString()}`, { token: user.token })).text);
      expect(ranged.slice(1).map((r) => r[0])).toEqual(own.filter((i) => i >= 2000).map(idOf).reverse());
      const bad = await t.request('GET', '/api/usage/export.csv?from=never', { token: user.token });
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({ error: expect.any(String) });
    });
  });
}

/**
 * The compiled binary: embeddings and the Responses API through the official openai client, billed
 * like chat, and GET /metrics behind METRICS_TOKEN with counters that moved by exactly N.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { sql } from 'drizzle-orm';
import type { RunningBinary } from '../../support/binary';
import type { TestDatabase } from '../../support/db';
import { type GatewayBinary, startGatewayBinary } from '../../support/gateway-binary';
import { scrape } from '../../support/prometheus';

const TOKEN = 'binary-metrics-token-0123456789';

describe('embeddings, responses and metrics in the compiled binary (postgres)', () => {
  let g: GatewayBinary;
  let db: TestDatabase;
  let cpd: RunningBinary;
  let client: OpenAI;

  beforeAll(async () => {
    g = await startGatewayBinary({
      price: { unit: 'per_million_tokens', price: 1000 },
      email: 'breadth@example.com',
      balanceMicros: 1_000_000n,
      env: { METRICS_TOKEN: TOKEN, RATE_LIMITS: 'gateway=10000/1m' },
    });
    ({ db, cpd } = g);
    client = new OpenAI({ baseURL: `${cpd.url}/v1`, apiKey: g.key, maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await g?.close();
  });

  test('N calls of each kind: answers, debits and metrics agree', async () => {
    expect((await fetch(`${cpd.url}/metrics`)).status).toBe(401);
    const auth = { authorization: `Bearer ${TOKEN}` };
    const before = await scrape(`${cpd.url}/metrics`, auth);
    const N = 3;
    for (let i = 0; i < N; i++) {
      const e = await client.embeddings.create({ model: 'm1', input: ['one two', 'three'] });
      expect(e.data.map((d) => Array.from(d.embedding))).toEqual([
        [0, 2, 0.5],
        [1, 1, 0.5],
      ]);
      expect(e.usage.prompt_tokens).toBe(3);
      const r = await client.responses.create({ model: 'm1', input: 'hi' });
      expect(r.output_text).toBe('Hello from the fake upstream.');
      const final = await client.responses.stream({ model: 'm1', input: 'hi' }).finalResponse();
      expect(final.output_text).toBe('Hello from the fake upstream.');
      expect(final.usage).toMatchObject({ input_tokens: 10, output_tokens: 5 });
    }
    const after = await scrape(`${cpd.url}/metrics`, auth);
    const delta = (name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
    expect(delta('cpd_http_requests_total', { method: 'POST', route: '/v1/embeddings', status: '200' })).toBe(N);
    expect(delta('cpd_http_requests_total', { method: 'POST', route: '/v1/responses', status: '200' })).toBe(2 * N);
    expect(delta('cpd_gateway_requests_total', { model: 'm1', status: '200' })).toBe(3 * N);
    expect(delta('cpd_gateway_tokens_total', { model: 'm1', kind: 'prompt' })).toBe(N * (3 + 10 + 10));
    expect(delta('cpd_gateway_cost_micros_total', { model: 'm1', currency: 'USD' })).toBe(1000 * N * (3 + 15 + 15));
    expect(after.typeOf('process_resident_memory_bytes')).toBe('gauge');

    expect(await cpd.stop()).toBe(0);
    const [row] = await db.database.query<{ n: number; debited: string; balance: string }>(
      sql`select (select count(*)::int from router_usage where status = 200) as n,
                 (select (-sum(amount_micros))::text from wallet_transactions where type = 'usage') as debited,
                 (select balance_micros::text from wallets) as balance`,
    );
    expect(row).toEqual({ n: 3 * N, debited: String(1000 * N * 33), balance: String(1_000_000 - 1000 * N * 33) });
  });
});

/**
 * The compiled binary: the gateway bills through a real listener, SIGTERM drains every queued
 * usage row and debit before the process exits, and no prompt holds the process while its tokens
 * are counted.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { sql } from 'drizzle-orm';
import { type GatewayBinary, startGatewayBinary } from '../../support/gateway-binary';
import { waitFor } from '../../support/wait';
import { countPromptTokens } from '../../../src/modules/metering/metering.tokens';

describe('gateway in the compiled binary (postgres)', () => {
  let g: GatewayBinary;

  beforeAll(async () => {
    g = await startGatewayBinary({ price: { unit: 'per_request', price: 0.002 }, email: 'binary@example.com', balanceMicros: 1_000_000n, env: { RATE_LIMITS: 'gateway=10000/1m' } });
  }, 120_000);
  afterAll(async () => {
    await g?.close();
  });

  test('JSON and SSE requests are billed; SIGTERM writes every usage row before exit', async () => {
    const { cpd, db, key } = g;
    const client = new OpenAI({ baseURL: `${cpd.url}/v1`, apiKey: key, maxRetries: 0 });
    const n = 40;
    const costs = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        if (i % 2) return (await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] })).usage as unknown as { cost: number };
        let last: unknown;
        for await (const c of await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true })) last = c;
        return (last as { usage: { cost: number } }).usage;
      }),
    );
    expect(costs.every((u) => u.cost === 0.002)).toBe(true);
    expect(await cpd.stop()).toBe(0);
    const [row] = await db.database.query<{ n: number; debited: string; balance: string }>(
      sql`select (select count(*)::int from router_usage where status = 200) as n,
                 (select (-sum(amount_micros))::text from wallet_transactions where type = 'usage') as debited,
                 (select balance_micros::text from wallets) as balance`,
    );
    expect(row).toEqual({ n, debited: String(n * 2000), balance: String(1_000_000 - n * 2000) });
  });
});

describe('token counting in the compiled binary (postgres)', () => {
  let g: GatewayBinary;

  beforeAll(async () => {
    g = await startGatewayBinary({ price: { unit: 'per_million_tokens', price: 1 }, email: 'counted@example.com', balanceMicros: 1_000_000n });
  }, 120_000);
  afterAll(async () => {
    await g?.close();
  });

  test('a stream whose prompt is a megabyte of spaces is counted without holding the process', async () => {
    const { cpd, up, key } = g;
    // The tokenizer's time grows with the square of a run of one kind of character: counting this
    // prompt whole (for the stream's X-Cost, and here for its usage: the upstream reports none)
    // held the process for hours. The upstream holds its answer until /healthz has answered.
    const gate = Promise.withResolvers<void>();
    up.set({ usage: false, content: 'fine', hold: { afterFrames: 0, until: gate.promise } });
    const messages = [{ role: 'user' as const, content: `${' '.repeat(1_000_000)}hi` }];
    const client = new OpenAI({ baseURL: `${cpd.url}/v1`, apiKey: key, maxRetries: 0 });
    const streamed = (async () => {
      const chunks = [];
      for await (const c of await client.chat.completions.create({ model: 'm1', messages, stream: true })) chunks.push(c);
      return chunks.at(-1) as unknown as { usage: { prompt_tokens: number } };
    })();
    try {
      // The count starts once the request is on its way upstream.
      await waitFor(() => up.requests.some((r) => r.path.endsWith('/chat/completions')), 'the request upstream');
      expect((await fetch(`${cpd.url}/healthz`)).status).toBe(200);
    } finally {
      gate.resolve();
    }
    expect((await streamed).usage.prompt_tokens).toBe(await countPromptTokens({ messages }));
  });
});

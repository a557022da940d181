/** The service contract the agents module uses: streamChat and completeChat, billed or anonymous. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { AppError } from '../../../src/platform/errors';
import { fundedUser, type Harness, startHarness } from '../gateway/gateway-harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
  await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
});
afterAll(() => h.close());

const hi = [{ role: 'user', content: 'hi' }];

describe('router service', () => {
  test('streamChat yields chunks, the last with usage and cost, and debits the caller', async () => {
    h.up.set({ content: 'a b c' });
    const u = await fundedUser(h, 1_000_000n);
    const chunks = [];
    for await (const c of h.t.services.router.streamChat({ caller: { userId: u.user.id, keyId: null }, body: { model: 'm1', messages: hi, stream: true } })) chunks.push(c);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13, cost: 0.013 } });
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - 13_000n);
    h.up.reset();
  });

  test('streamChat throws an AppError before any chunk when nothing can serve', async () => {
    const iterate = async () => {
      for await (const _ of h.t.services.router.streamChat({ caller: null, body: { model: 'nope', messages: hi } })) throw new Error('no chunk expected');
    };
    const err = await iterate().then(() => null, (e) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err.kind).toBe('not_found');
  });

  test('completeChat with stream: true still answers one JSON completion; anonymous calls are recorded, not debited', async () => {
    const { response, costMicros } = await h.t.services.router.completeChat({ caller: null, body: { model: 'm1', messages: hi, stream: true, stream_options: { include_usage: true } } });
    expect((response.choices as Array<{ message: { content: string } }>)[0]!.message.content).toBe('Hello from the fake upstream.');
    expect(costMicros).toBe(15_000n);
    expect(h.up.requests.at(-1)!.body).toEqual({ model: 'm1', messages: hi, stream: false });
    await h.t.services.router.flushUsage();
    const rows = await h.t.ctx.database.query<{ user_id: string | null; cost_micros: string }>(sql`select user_id, cost_micros::text from router_usage where user_id is null`);
    expect(rows).toEqual([{ user_id: null, cost_micros: '15000' }]);
    const [debits] = await h.t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from wallet_transactions where type = 'usage' and user_id is null`);
    expect(debits!.n).toBe(0);
  });

  test('a consumer that stops iterating is billed for what it received', async () => {
    h.up.set({ content: 'w '.repeat(100), chunkDelayMs: 5 });
    const u = await fundedUser(h, 1_000_000n);
    let got = 0;
    for await (const c of h.t.services.router.streamChat({ caller: { userId: u.user.id, keyId: null }, body: { model: 'm1', messages: hi } })) {
      if ((c.choices as unknown[]).length) got++;
      if (got === 4) break;
    }
    await h.t.services.router.flushUsage();
    const [row] = await h.t.ctx.database.query<{ completion_tokens: number; prompt_tokens: number; aborted: boolean; cost_micros: string }>(
      sql`select completion_tokens, prompt_tokens, aborted, cost_micros::text from router_usage where user_id = ${u.user.id}`,
    );
    expect(row!.aborted).toBe(true);
    expect(row!.completion_tokens).toBe(countTokens('w '.repeat(4)));
    expect(await u.balance()).toBe(1_000_000n - BigInt(row!.cost_micros));
    expect(BigInt(row!.cost_micros)).toBe(BigInt(row!.prompt_tokens + row!.completion_tokens) * 1000n);
    h.up.reset();
  });
});

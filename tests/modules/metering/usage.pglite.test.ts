/** The durable usage path and the admission's bound on the embedded database (PGlite). */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { fundedUser, type Harness, startHarness } from '../gateway/gateway-harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ kind: 'pglite' });
  await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
});
afterAll(() => h.close());

describe('usage on PGlite', () => {
  test('parallel JSON and stream requests: each answered request has its usage row and debit when its answer ends', async () => {
    const u = await fundedUser(h, 10_000_000n);
    const answered = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        if (i % 2) return (await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] })).usage;
        let last: unknown;
        for await (const c of await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true })) last = c;
        return (last as { usage: unknown }).usage;
      }),
    );
    expect(answered).toHaveLength(20);
    // No flush: the rows were committed before the answers ended.
    const [row] = await h.t.ctx.database.query<{ rows: number; ledger: string }>(
      sql`select (select count(*)::int from router_usage where user_id = ${u.user.id}) as rows,
                 (select sum(amount_micros)::text from wallet_transactions where user_id = ${u.user.id}) as ledger`,
    );
    expect(row!.rows).toBe(20);
    expect(BigInt(row!.ledger)).toBe(await u.balance());
    expect(await u.balance()).toBe(10_000_000n - 20n * 15_000n);
  });

  test('image parts count in the upper bound: a balance below one request serves exactly one of 10 parallel requests', async () => {
    h.up.set({ promptTokens: 1000 });
    const u = await fundedUser(h, 1_000_000n);
    const content = [{ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] as never;
    const statuses = await Promise.all(
      Array.from({ length: 10 }, () =>
        u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content }], max_tokens: 5 }).then(
          () => 200,
          (e) => e.status as number,
        ),
      ),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(await u.balance()).toBe(1_000_000n - 1_005_000n);
    h.up.reset();
  });
});

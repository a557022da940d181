/**
 * Market pricing's API (docs/billing.md): token prices on the catalog, price groups and a user's
 * group, the caller's effective prices, redemption codes and their throttle. The costs these make
 * are checked on the binary (market-pricing.binary.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';

for (const kind of DB_KINDS) {
  describe(`market pricing (${kind})`, () => {
    let t: TestApp;
    let admin: Awaited<ReturnType<typeof makeUser>>;
    let user: Awaited<ReturnType<typeof makeUser>>;
    beforeAll(async () => {
      t = await createTestApp(kind, { SITE: 'cn' });
      admin = await makeUser(t, { admin: true });
      user = await makeUser(t);
    });
    afterAll(() => t.close());

    const putModels = (models: unknown[]) => t.request('PUT', '/api/admin/billing/pricing/models', { token: admin.token, body: { models } });

    test('token prices: the admin sets them, GET /api/pricing shows those set, more than 6 decimals is 400', async () => {
      const res = await putModels([
        { slug: 'chat', unit: 'per_million_tokens', price: 4, input_price: 2.5, output_price: 10, cached_input_price: 1.25 },
        { slug: 'half', unit: 'per_million_tokens', price: 3, output_price: 6 },
        { slug: 'plain', unit: 'per_million_tokens', price: 1 },
      ]);
      expect(res.status).toBe(200);
      const pub = await t.request('GET', '/api/pricing');
      expect(pub.body.models).toEqual([
        { id: expect.any(String), slug: 'chat', unit: 'per_million_tokens', price: 4, input_price: 2.5, output_price: 10, cached_input_price: 1.25, currency: 'CNY' },
        { id: expect.any(String), slug: 'half', unit: 'per_million_tokens', price: 3, output_price: 6, currency: 'CNY' },
        { id: expect.any(String), slug: 'plain', unit: 'per_million_tokens', price: 1, currency: 'CNY' },
      ]);
      // Absent: input and output cost `price`, cached input the input price.
      expect(t.services.pricing.priceOf('half')).toMatchObject({ inputMicros: 3_000_000n, outputMicros: 6_000_000n, cachedInputMicros: 3_000_000n });
      const bad = await putModels([{ slug: 'x', unit: 'per_million_tokens', price: 1, cached_input_price: 0.0000001 }]);
      expect(bad.status).toBe(400);
      expect((await t.request('GET', '/api/pricing')).body).toEqual(pub.body);
      // The China site's page is in Chinese unless the visitor asks otherwise.
      expect((await t.request('GET', '/pricing')).text).toContain('输入 ¥2.50<br>输出 ¥10.00<br>缓存输入 ¥1.25<br>每百万 token');
      const english = await t.request('GET', '/pricing', { headers: { 'accept-language': 'en' } });
      expect(english.text).toContain('input 2.5 CNY<br>output 10 CNY<br>cached input 1.25 CNY');
    });

    test('a price row stored before the token prices existed (no input, output or cached price) means what it meant', async () => {
      await t.ctx.database.query(sql`update model_prices set input_price_micros = null, output_price_micros = null, cached_input_price_micros = null where slug = 'chat'`);
      await t.ctx.database.notify('cpd_pricing', 'test');
      const { waitFor } = await import('../../support/wait');
      await waitFor(() => t.services.pricing.priceOf('chat')?.outputMicros === 4_000_000n);
      expect(t.services.pricing.priceOf('chat')).toEqual({ unit: 'per_million_tokens', priceMicros: 4_000_000n, inputMicros: 4_000_000n, outputMicros: 4_000_000n, cachedInputMicros: 4_000_000n, multiplierE4: 10_000n });
    });

    test('price groups: default ×1 always exists; bad multipliers are 400 and change nothing; audited', async () => {
      expect((await t.request('GET', '/api/admin/billing/price-groups', { token: admin.token })).body).toEqual({ groups: [{ name: 'default', multiplier: 1, description: null }] });
      expect((await t.request('GET', '/api/admin/billing/price-groups', { token: user.token })).status).toBe(403);
      for (const multiplier of [0, -1, 10.0001, 1.23456, 11])
        expect((await t.request('PUT', '/api/admin/billing/price-groups', { token: admin.token, body: { groups: [{ name: 'vip', multiplier }] } })).status).toBe(400);
      expect((await t.request('PUT', '/api/admin/billing/price-groups', { token: admin.token, body: { groups: [{ name: 'default', multiplier: 2 }] } })).status).toBe(400);
      const put = await t.request('PUT', '/api/admin/billing/price-groups', {
        token: admin.token,
        body: { groups: [{ name: 'vip', multiplier: 0.85, description: 'resellers' }, { name: 'premium', multiplier: 10 }] },
      });
      expect(put.status).toBe(200);
      expect(put.body.groups).toEqual([
        { name: 'default', multiplier: 1, description: null },
        { name: 'vip', multiplier: 0.85, description: 'resellers' },
        { name: 'premium', multiplier: 10, description: null },
      ]);
      const audit = await t.request('GET', '/api/admin/audit?limit=1', { token: admin.token });
      expect(audit.body.entries[0]).toMatchObject({ action: 'pricing.groups' });
    });

    test("a user's group: PATCH takes it, admin views show it, GET /api/billing/prices answers the user's prices", async () => {
      expect((await t.request('GET', `/api/admin/users/${user.id}`, { token: admin.token })).body.price_group).toBe('default');
      // An unknown group is 400 and changes nothing else asked with it; an unknown user is 404.
      expect((await t.request('PATCH', `/api/admin/users/${user.id}`, { token: admin.token, body: { price_group: 'nope', disabled: true } })).status).toBe(400);
      expect((await t.request('GET', `/api/admin/users/${user.id}`, { token: admin.token })).body.disabled).toBe(false);
      expect((await t.request('PATCH', '/api/admin/users/usr_nobody', { token: admin.token, body: { price_group: 'vip' } })).status).toBe(404);
      const patched = await t.request('PATCH', `/api/admin/users/${user.id}`, { token: admin.token, body: { price_group: 'vip' } });
      expect(patched.status).toBe(200);
      expect(patched.body.price_group).toBe('vip');
      const list = await t.request('GET', '/api/admin/users?limit=100', { token: admin.token });
      expect(list.body.users.find((u: { id: string }) => u.id === user.id).price_group).toBe('vip');
      const prices = await t.request('GET', '/api/billing/prices', { token: user.token });
      expect(prices.status).toBe(200);
      expect(prices.body.group).toBe('vip');
      expect(prices.body.multiplier).toBe(0.85);
      expect(prices.body.models.find((m: { slug: string }) => m.slug === 'half')).toEqual({
        id: expect.any(String),
        slug: 'half',
        unit: 'per_million_tokens',
        price: 2.55,
        input_price: 2.55,
        output_price: 5.1,
        cached_input_price: 2.55,
        currency: 'CNY',
      });
      expect(t.services.pricing.priceOf('half', user.id)?.multiplierE4).toBe(8_500n);
      // A key answers the same.
      const key = await t.services.accounts.createApiKey(user.id, 'prices');
      expect((await t.request('GET', '/api/billing/prices', { token: key.key })).body).toEqual(prices.body);
      // A removed group's members go back to default.
      await t.request('PUT', '/api/admin/billing/price-groups', { token: admin.token, body: { groups: [{ name: 'premium', multiplier: 10 }] } });
      expect((await t.request('GET', '/api/billing/prices', { token: user.token })).body.group).toBe('default');
      await t.request('PUT', '/api/admin/billing/price-groups', { token: admin.token, body: { groups: [{ name: 'vip', multiplier: 0.85 }] } });
    });

    test('codes: a batch is shown once (JSON or CSV), listed by prefix, redeemed once into a top-up; every refusal is the same 400', async () => {
      const bad = await t.request('POST', '/api/admin/billing/codes', { token: admin.token, body: { count: 1001, amount: 10 } });
      expect(bad.status).toBe(400);
      expect((await t.request('POST', '/api/admin/billing/codes', { token: admin.token, body: { count: 1, amount: 0.0000001 } })).status).toBe(400);
      const made = await t.request('POST', '/api/admin/billing/codes', { token: admin.token, body: { count: 3, amount: 25.5, note: 'shop' } });
      expect(made.status).toBe(201);
      expect(made.body.codes).toHaveLength(3);
      expect(new Set(made.body.codes).size).toBe(3);
      const [first, second, third] = made.body.codes as string[];
      // Stored hashed: the code is nowhere in the database.
      const stored = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from redemption_codes where code_hash = ${first!} or prefix = ${first!}`);
      expect(stored[0]!.n).toBe(0);

      const redeemer = await makeUser(t);
      const ok = await t.request('POST', '/api/billing/redeem', { token: redeemer.token, body: { code: first!.toLowerCase().replaceAll('-', ' ') } });
      expect(ok.status).toBe(200);
      expect(ok.body.transaction).toMatchObject({ type: 'topup', amount: 25.5, currency: 'CNY', description: `Redemption code ${first!.slice(0, 4)}…` });
      expect(await t.services.billing.getBalanceMicros(redeemer.id)).toBe(25_500_000n);

      const disabled = await t.request('DELETE', `/api/admin/billing/codes/${made.body.batch_id}`, { token: admin.token });
      expect(disabled.body).toEqual({ batch_id: made.body.batch_id, disabled: 2 });
      expect((await t.request('DELETE', '/api/admin/billing/codes/cdb_nope', { token: admin.token })).status).toBe(404);
      const expiring = await t.request('POST', '/api/admin/billing/codes', { token: admin.token, body: { count: 1, amount: 1, expires_at: new Date(Date.now() + 3600_000).toISOString() } });
      await t.ctx.database.query(sql`update redemption_codes set expires_at = now() - interval '1 second' where batch_id = ${expiring.body.batch_id}`);

      const answers = [];
      for (const code of [first!, second!, expiring.body.codes[0], 'AAAA-BBBB-CCCC-DDDD-EEEE'])
        answers.push(await t.request('POST', '/api/billing/redeem', { token: redeemer.token, body: { code } }));
      expect(answers.map((a) => [a.status, a.text])).toEqual(Array(4).fill([400, '{"error":"invalid code"}']));
      expect(await t.services.billing.getBalanceMicros(redeemer.id)).toBe(25_500_000n);

      const listed = await t.request('GET', `/api/admin/billing/codes?batch_id=${made.body.batch_id}`, { token: admin.token });
      const byPrefix = new Map(listed.body.codes.map((c: { prefix: string }) => [c.prefix, c]));
      expect(byPrefix.get(first!.slice(0, 4))).toMatchObject({ status: 'redeemed', redeemed_by: redeemer.id, amount: 25.5, currency: 'CNY', redeemed_at: expect.any(String) });
      expect(byPrefix.get(third!.slice(0, 4))).toMatchObject({ status: 'disabled', redeemed_by: null });
      const expired = await t.request('GET', `/api/admin/billing/codes?batch_id=${expiring.body.batch_id}`, { token: admin.token });
      expect(expired.body.codes[0].status).toBe('expired');

      const csv = await t.request('POST', '/api/admin/billing/codes', { token: admin.token, body: { count: 2, amount: 5 }, headers: { accept: 'text/csv' } });
      expect(csv.status).toBe(201);
      expect(csv.headers.get('content-type')).toContain('text/csv');
      const lines = csv.text.trim().split('\r\n');
      expect(lines[0]).toBe('code,amount,currency,expires_at,batch_id');
      expect(lines).toHaveLength(3);
      expect(lines[1]).toMatch(/^[0-9A-Z]{4}(-[0-9A-Z]{4}){4},5,CNY,,cdb_/);

      const entries = (await t.request('GET', '/api/admin/audit?limit=5', { token: admin.token })).body.entries.map((e: { action: string }) => e.action);
      expect(entries).toContain('billing.codes.create');
      expect(entries).toContain('billing.codes.disable');
      expect(JSON.stringify((await t.request('GET', '/api/admin/audit?limit=50', { token: admin.token })).body)).not.toContain(second!);
    });

    test('10 failed redemptions an hour, then 429 even for a good code', async () => {
      const guesser = await makeUser(t);
      const good = (await t.request('POST', '/api/admin/billing/codes', { token: admin.token, body: { count: 1, amount: 1 } })).body.codes[0];
      for (let i = 0; i < 10; i++) expect((await t.request('POST', '/api/billing/redeem', { token: guesser.token, body: { code: `WRONG-${i}` } })).status).toBe(400);
      const limited = await t.request('POST', '/api/billing/redeem', { token: guesser.token, body: { code: good } });
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBeTruthy();
      expect(await t.services.billing.getBalanceMicros(guesser.id)).toBe(0n);
      // Another user is not throttled by it.
      expect((await t.request('POST', '/api/billing/redeem', { token: user.token, body: { code: good } })).status).toBe(200);
      expect((await t.request('POST', '/api/billing/redeem', { body: { code: good } })).status).toBe(401);
    });
  });
}

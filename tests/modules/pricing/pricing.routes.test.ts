import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createPricingService } from '../../../src/modules/pricing';
import { createTestApp, createTestContext, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { waitFor } from '../../support/wait';

for (const kind of DB_KINDS) {
  describe(`pricing (${kind})`, () => {
    let t: TestApp;
    let admin: Awaited<ReturnType<typeof makeUser>>;
    let user: Awaited<ReturnType<typeof makeUser>>;
    beforeAll(async () => {
      t = await createTestApp(kind, { SITE: 'cn' });
      admin = await makeUser(t, { admin: true });
      user = await makeUser(t);
    });
    afterAll(() => t.close());

    test('the empty catalog is public', async () => {
      const res = await t.request('GET', '/api/pricing');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ models: [], gpus: [] });
    });

    test('admin routes: 401 without a credential, 403 for a non-admin', async () => {
      const body = { models: [] };
      expect((await t.request('PUT', '/api/admin/billing/pricing/models', { body })).status).toBe(401);
      expect((await t.request('PUT', '/api/admin/billing/pricing/models', { body, token: user.token })).status).toBe(403);
      expect((await t.request('PUT', '/api/admin/billing/pricing/gpus', { body: { gpus: [] }, token: user.token })).status).toBe(403);
    });

    test('PUT models replaces the list and answers it in the site currency', async () => {
      const res = await t.request('PUT', '/api/admin/billing/pricing/models', {
        token: admin.token,
        body: { models: [{ slug: 'llama-8b', unit: 'per_million_tokens', price: 0.1 }, { slug: 'flux', unit: 'per_request', price: 0.02 }] },
      });
      expect(res.status).toBe(200);
      expect(res.body.models).toEqual([
        { id: expect.any(String), slug: 'llama-8b', unit: 'per_million_tokens', price: 0.1, currency: 'CNY' },
        { id: expect.any(String), slug: 'flux', unit: 'per_request', price: 0.02, currency: 'CNY' },
      ]);
      expect(t.services.pricing.priceOf('llama-8b')).toEqual({ unit: 'per_million_tokens', priceMicros: 100_000n, inputMicros: 100_000n, outputMicros: 100_000n, cachedInputMicros: 100_000n, multiplierE4: 10_000n });
      expect(t.services.pricing.priceOf('flux')).toEqual({ unit: 'per_request', priceMicros: 20_000n, inputMicros: 20_000n, outputMicros: 20_000n, cachedInputMicros: 20_000n, multiplierE4: 10_000n });
      expect(t.services.pricing.priceOf('nope')).toBeNull();

      const again = await t.request('PUT', '/api/admin/billing/pricing/models', {
        token: admin.token,
        body: { models: [{ slug: 'flux', unit: 'per_request', price: 0.5 }] },
      });
      expect(again.body.models.map((m: { slug: string }) => m.slug)).toEqual(['flux']);
      expect(t.services.pricing.priceOf('llama-8b')).toBeNull();
    });

    test('PUT gpus replaces the list; GET applies limit to each list', async () => {
      const res = await t.request('PUT', '/api/admin/billing/pricing/gpus', {
        token: admin.token,
        body: { gpus: [{ name: 'h100', hourly_price: 2.5 }, { name: 'a10', hourly_price: 0.75 }] },
      });
      expect(res.status).toBe(200);
      expect(res.body.gpus).toEqual([
        { id: expect.any(String), name: 'h100', hourly_price: 2.5, currency: 'CNY' },
        { id: expect.any(String), name: 'a10', hourly_price: 0.75, currency: 'CNY' },
      ]);
      const limited = await t.request('GET', '/api/pricing?limit=1');
      expect(limited.body.gpus).toHaveLength(1);
      expect(limited.body.models).toHaveLength(1);
      expect((await t.request('GET', '/api/pricing?limit=0')).body).toEqual({ models: [], gpus: [] });
    });

    test.each([
      ['negative price', { models: [{ slug: 'a', unit: 'per_request', price: -1 }] }],
      ['unknown unit', { models: [{ slug: 'a', unit: 'per_token', price: 1 }] }],
      ['price as a string', { models: [{ slug: 'a', unit: 'per_request', price: '1' }] }],
      ['missing price', { models: [{ slug: 'a', unit: 'per_request' }] }],
      ['duplicate slug', { models: [{ slug: 'a', unit: 'per_request', price: 1 }, { slug: 'a', unit: 'per_request', price: 2 }] }],
      ['not a list', { models: 'x' }],
      ['a price with 7 decimals', { models: [{ slug: 'a', unit: 'per_request', price: 0.0000004 }] }],
      ['a price of 1.1234567', { models: [{ slug: 'a', unit: 'per_million_tokens', price: 1.1234567 }] }],
      ['a price beyond a bigint of micro-units', { models: [{ slug: 'a', unit: 'per_request', price: 1e308 }] }],
    ])('PUT models refuses %s with 400', async (_name, body) => {
      const res = await t.request('PUT', '/api/admin/billing/pricing/models', { token: admin.token, body });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: expect.any(String) });
    });

    test.each([
      ['negative price', { gpus: [{ name: 'a', hourly_price: -0.01 }] }],
      ['duplicate name', { gpus: [{ name: 'a', hourly_price: 1 }, { name: 'a', hourly_price: 1 }] }],
      ['empty name', { gpus: [{ name: '', hourly_price: 1 }] }],
      ['a price with 7 decimals', { gpus: [{ name: 'a', hourly_price: 2.0000001 }] }],
      ['a price of 1e12', { gpus: [{ name: 'a', hourly_price: 1e12 }] }],
    ])('PUT gpus refuses %s with 400', async (_name, body) => {
      const res = await t.request('PUT', '/api/admin/billing/pricing/gpus', { token: admin.token, body });
      expect(res.status).toBe(400);
    });

    test('a price with more than 6 decimals is refused and changes nothing; 6 decimals are kept exactly', async () => {
      const before = (await t.request('GET', '/api/pricing')).body;
      const refused = await t.request('PUT', '/api/admin/billing/pricing/models', {
        token: admin.token,
        body: { models: [{ slug: 'cheap', unit: 'per_request', price: 0.0000004 }] },
      });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toContain('6 decimals');
      expect((await t.request('GET', '/api/pricing')).body).toEqual(before);

      const smallest = await t.request('PUT', '/api/admin/billing/pricing/models', {
        token: admin.token,
        body: { models: [{ slug: 'cheap', unit: 'per_request', price: 0.000001 }, { slug: 'big', unit: 'per_million_tokens', price: 123456.654321 }] },
      });
      expect(smallest.status).toBe(200);
      expect(smallest.body.models.map((m: { price: number }) => m.price)).toEqual([0.000001, 123456.654321]);
    });

    test('malformed body and limit are 400, never 500', async () => {
      expect((await t.request('PUT', '/api/admin/billing/pricing/gpus', { token: admin.token, body: '{not json' })).status).toBe(400);
      expect((await t.request('GET', '/api/pricing?limit=-1')).status).toBe(400);
      expect((await t.request('GET', '/api/pricing?limit=abc')).status).toBe(400);
    });

    test('a change in one process reaches another process cache through NOTIFY', async () => {
      const other = await createTestContext(kind, { SITE: 'cn' }, { testDb: t.testDb });
      try {
        const pricing = createPricingService(other.ctx);
        await pricing.load();
        await t.services.pricing.setModelPrices([{ slug: 'shared', unit: 'per_million_tokens', price: 3 }]);
        await waitFor(() => pricing.priceOf('shared')?.priceMicros === 3_000_000n, 'the other cache to reload');
        expect(pricing.catalog().models[0]).toMatchObject({ slug: 'shared', price: 3 });
      } finally {
        await other.close();
      }
    });
  });
}

/**
 * API keys with limits: the /api/api-keys contract, and enforcement at the gateway through the
 * official openai client against a fake upstream, on PostgreSQL and PGlite.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { sql } from 'drizzle-orm';
import { DB_KINDS } from '../../support/db';
import { startFakeUpstream } from '../../support/fake-upstream';
import { makeUser } from '../../support/make';
import { fundedUser, type Harness, startHarness, waitFor } from './gateway-harness';

/** Per-request price: every request's upper bound is exactly its cost. */
const PER_REQUEST = 0.1;
const msg = [{ role: 'user' as const, content: 'hi' }];

for (const kind of DB_KINDS) {
  describe(`API key limits (${kind})`, () => {
    let h: Harness;
    let u: Awaited<ReturnType<typeof fundedUser>>;
    const api = (method: string, path: string, body?: unknown, token = u.user.token) => h.t.request(method, path, { token, body });
    const clientFor = (key: string) => new OpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
    const statusOf = (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (e: { status?: number }) => e.status ?? 0,
      );
    const marginsOf = async (keyId: string) =>
      Number((await h.t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from key_spend_grants where key_id = ${keyId} and margin`))[0]!.n);
    /** Every usage row committed and the key's margin given back. */
    const settled = async (keyId: string) => {
      await h.t.services.router.flushUsage();
      await waitFor(async () => (await marginsOf(keyId)) === 0, 'margin given back');
    };

    beforeAll(async () => {
      const up = await startFakeUpstream({ models: ['m1', 'pr'] });
      h = await startHarness({ kind, upstream: up, backends: `m1=${up.url},pr=${up.url}` });
      await h.t.services.pricing.setModelPrices([
        { slug: 'm1', unit: 'per_million_tokens', price: 1000 },
        { slug: 'pr', unit: 'per_request', price: PER_REQUEST },
        { slug: 'idle', unit: 'per_request', price: PER_REQUEST },
      ]);
      u = await fundedUser(h, 1_000_000_000n);
    });
    afterAll(async () => {
      await h.close();
      await h.up.close();
    });

    test('create with limits answers them and spent; the list shows them; PATCH changes and clears', async () => {
      const created = await api('POST', '/api/api-keys', { name: 'limited', models: ['pr', 'm1'], spend_limit: 2.5, spend_period: 'month', expires_at: '2099-01-01T00:00:00Z', rpm: 60 });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ name: 'limited', models: ['pr', 'm1'], spend_limit: 2.5, spend_period: 'month', spent: 0, expires_at: '2099-01-01T00:00:00.000Z', rpm: 60, last_used_at: null });
      expect(created.body.key).toMatch(/^bfvk-/);
      const listed = (await api('GET', '/api/api-keys')).body as Array<Record<string, unknown>>;
      const { key: _shownOnce, ...shown } = created.body;
      expect(listed.find((k) => k.id === created.body.id)).toEqual(shown);
      const plain = listed.find((k) => k.id === u.key.id)!;
      expect(plain).toMatchObject({ models: null, spend_limit: null, spend_period: null, expires_at: null, rpm: null });

      const patched = await api('PATCH', `/api/api-keys/${created.body.id}`, { name: 'renamed', models: null, spend_limit: 1, rpm: null });
      expect(patched.status).toBe(200);
      expect(patched.body).toEqual({ ...shown, name: 'renamed', models: null, spend_limit: 1, rpm: null });
      const cleared = await api('PATCH', `/api/api-keys/${created.body.id}`, { spend_limit: null });
      expect(cleared.body).toMatchObject({ spend_limit: null, spend_period: null, expires_at: '2099-01-01T00:00:00.000Z' });
      // A limit without a period holds for the key's whole life.
      expect((await api('PATCH', `/api/api-keys/${created.body.id}`, { spend_limit: 3 })).body).toMatchObject({ spend_limit: 3, spend_period: 'total' });
    });

    test('bad input is 400 and changes nothing; foreign and unknown keys are 404', async () => {
      const before = (await api('GET', '/api/api-keys')).body;
      for (const body of [
        { name: 'x', models: ['nothing-priced'] },
        { name: 'x', models: ['pr', 'unpriced'] },
        { name: 'x', models: [] },
        { name: 'x', spend_limit: -1 },
        { name: 'x', spend_limit: 0.0000001 },
        { name: 'x', spend_limit: 1e308 },
        { name: 'x', spend_period: 'day' },
        { name: 'x', spend_limit: 1, spend_period: 'week' },
        { name: 'x', expires_at: '2001-01-01T00:00:00Z' },
        { name: 'x', expires_at: 'tomorrow' },
        { name: 'x', rpm: 0 },
        { name: 'x', rpm: 1.5 },
      ]) {
        const res = await api('POST', '/api/api-keys', body);
        expect({ body, status: res.status }).toEqual({ body, status: 400 });
        expect(typeof res.body.error).toBe('string');
      }
      for (const body of [{}, { models: ['nope'] }, { spend_limit: 1.1234567 }, { rpm: 0 }, { spend_period: 'month' }, { name: '' }]) {
        expect((await api('PATCH', `/api/api-keys/${u.key.id}`, body)).status).toBe(400);
      }
      expect((await api('GET', '/api/api-keys')).body).toEqual(before);

      const other = await makeUser(h.t);
      expect((await api('PATCH', `/api/api-keys/${u.key.id}`, { rpm: 5 }, other.token)).status).toBe(404);
      expect((await api('PATCH', '/api/api-keys/key_unknown', { rpm: 5 })).status).toBe(404);
      expect((await h.t.request('PATCH', `/api/api-keys/${u.key.id}`, { body: { rpm: 5 } })).status).toBe(401);
      expect((await api('GET', '/api/api-keys')).body).toEqual(before);
    });

    test('a model outside `models` is 403; a listed slug or route passes', async () => {
      const created = await api('POST', '/api/api-keys', { name: 'only-pr', models: ['pr'] });
      const client = clientFor(created.body.key);
      expect((await client.chat.completions.create({ model: 'pr', messages: msg })).usage).toMatchObject({ cost: PER_REQUEST });
      const refused = await client.chat.completions.create({ model: 'm1', messages: msg }).catch((e) => e);
      expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect(refused.status).toBe(403);
      // Outside `models` is 403 before the name is resolved: a limited key cannot tell a priced
      // model with no backend ('idle', 503 for other keys) or an unknown one (404) from the rest.
      expect(await statusOf(u.client.chat.completions.create({ model: 'idle', messages: msg }))).toBe(503);
      expect(await statusOf(u.client.chat.completions.create({ model: 'ghost', messages: msg }))).toBe(404);
      for (const model of ['idle', 'ghost']) {
        const answer = await client.chat.completions.create({ model, messages: msg }).catch((e) => e);
        expect(answer.status).toBe(403);
        expect(answer.error).toBe(`this API key may not use "${model}"`); // the body's {"error": …}, as the client reads it
      }
      // A change reaches the key at once.
      await api('PATCH', `/api/api-keys/${created.body.id}`, { models: ['m1'] });
      expect(await statusOf(client.chat.completions.create({ model: 'm1', messages: msg }))).toBe(200);
      expect(await statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))).toBe(403);
    });

    test('an expired key is 401 on the gateway', async () => {
      const created = await api('POST', '/api/api-keys', { name: 'soon', expires_at: new Date(Date.now() + 3_600_000).toISOString() });
      const client = clientFor(created.body.key);
      expect(await statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))).toBe(200);
      await api('PATCH', `/api/api-keys/${created.body.id}`, { expires_at: new Date(Date.now() - 1000).toISOString() });
      const refused = await client.chat.completions.create({ model: 'pr', messages: msg }).catch((e) => e);
      expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
      expect(await statusOf(client.models.list())).toBe(401);
    });

    test('over rpm is 429 with Retry-After', async () => {
      const created = await api('POST', '/api/api-keys', { name: 'slow', rpm: 2 });
      const client = clientFor(created.body.key);
      expect(await statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))).toBe(200);
      expect(await statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))).toBe(200);
      const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${created.body.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'pr', messages: msg }),
      });
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await res.json()) as { error: string }).error).toContain('2 requests per minute');
    });

    test('past its spend limit a key is 402 "key spend limit reached"; spent is listed; raising the limit lets it spend again', async () => {
      const created = await api('POST', '/api/api-keys', { name: 'budget', spend_limit: 0.25, spend_period: 'day' });
      const client = clientFor(created.body.key);
      // 0.1 + 0.1 are covered; the third is at the margin (nothing in flight, 0.2 < 0.25) and may cross.
      for (let i = 0; i < 3; i++) {
        expect(await statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))).toBe(200);
        await settled(created.body.id);
      }
      const refused = await fetch(`${h.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${created.body.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'pr', messages: msg }),
      });
      expect(refused.status).toBe(402);
      expect(await refused.json()).toEqual({ error: 'key spend limit reached' });
      const listed = ((await api('GET', '/api/api-keys')).body as Array<Record<string, unknown>>).find((k) => k.id === created.body.id);
      expect(listed).toMatchObject({ spend_limit: 0.25, spend_period: 'day', spent: 0.3 });

      await api('PATCH', `/api/api-keys/${created.body.id}`, { spend_limit: 0.4 });
      expect(await statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))).toBe(200);
      await settled(created.body.id);
      expect(await statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))).toBe(402);
      await api('PATCH', `/api/api-keys/${created.body.id}`, { spend_limit: null });
      expect(await statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))).toBe(200);
    });

    test('under concurrency the key overspends its limit by at most one request, like the wallet', async () => {
      const limit = 0.35;
      const created = await api('POST', '/api/api-keys', { name: 'burst', spend_limit: limit });
      const client = clientFor(created.body.key);
      const statuses = await Promise.all(Array.from({ length: 24 }, () => statusOf(client.chat.completions.create({ model: 'pr', messages: msg }))));
      await settled(created.body.id);
      const ok = statuses.filter((s) => s === 200).length;
      expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
      expect(statuses).toContain(402);
      const spent = ((await api('GET', '/api/api-keys')).body as Array<{ id: string; spent: number }>).find((k) => k.id === created.body.id)!.spent;
      expect(spent).toBeCloseTo(ok * PER_REQUEST, 6);
      expect(spent).toBeLessThanOrEqual(limit + PER_REQUEST);
      expect(ok).toBeGreaterThanOrEqual(1);
    });
  });
}

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { Elysia } from 'elysia';
import { createAccountsService } from '../../../src/modules/accounts';
import { authPlugin } from '../../../src/platform/http/auth';
import { errorPlugin } from '../../../src/platform/http/errors';
import { createTestApp, createTestContext, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { manualClock } from '../../support/clock';
import { waitFor } from '../../support/wait';

for (const kind of DB_KINDS) {
  describe(`API keys (${kind})`, () => {
    const clock = manualClock();
    let t: TestApp;
    let user: Awaited<ReturnType<typeof makeUser>>;
    let other: Awaited<ReturnType<typeof makeUser>>;
    /** A route taking keys, as the gateway's will. */
    let keyRoute: { handle(request: Request): Promise<Response> };
    const whoAmI = async (key: string) => {
      const res = await keyRoute.handle(new Request('http://localhost/k', { headers: { authorization: `Bearer ${key}` } }));
      return { status: res.status, body: await res.json() };
    };
    const lastUsed = async (id: string) =>
      (await t.ctx.database.query<{ last_used_at: Date | string | null }>(sql`select last_used_at from api_keys where id = ${id}`))[0]!.last_used_at;

    beforeAll(async () => {
      t = await createTestApp(kind, {}, { clock });
      user = await makeUser(t);
      other = await makeUser(t);
      keyRoute = new Elysia().use(errorPlugin(t.ctx.log)).use(authPlugin(t.services.accounts.resolver, 'http://localhost:8080')).get('/k', ({ caller }) => caller, { auth: ['key'] });
    });
    afterAll(() => t.close());

    test('create answers 201 with the full key once; list answers an array without it', async () => {
      const created = await t.request('POST', '/api/api-keys', { token: user.token, body: { name: 'ci' } });
      expect(created.status).toBe(201);
      const noLimits = { models: null, spend_limit: null, spend_period: null, spent: 0, expires_at: null, rpm: null, capture: false, org_id: null, created_by: user.id };
      expect(created.body).toEqual({ id: expect.any(String), key: expect.stringMatching(/^bfvk-[0-9A-Za-z]{40}$/), prefix: expect.any(String), name: 'ci', created_at: clock.now().toISOString(), last_used_at: null, ...noLimits });
      expect(created.body.prefix).toBe(created.body.key.slice(0, 12));

      const list = await t.request('GET', '/api/api-keys', { token: user.token });
      expect(list.status).toBe(200);
      expect(list.body).toEqual([{ id: created.body.id, prefix: created.body.prefix, name: 'ci', created_at: created.body.created_at, last_used_at: null, ...noLimits }]);
      expect(list.text).not.toContain(created.body.key);
      expect((await t.request('GET', '/api/api-keys', { token: other.token })).body).toEqual([]);
      const stored = await t.ctx.database.query<{ key_hash: string }>(sql`select key_hash from api_keys where id = ${created.body.id}`);
      expect(stored[0]!.key_hash).toMatch(/^[0-9a-f]{64}$/);
    });

    test('bad bodies are 400 and create nothing; no session is 401', async () => {
      for (const body of [{}, { name: '' }, { name: 5 }, { name: 'n'.repeat(101) }, '{"name":']) {
        expect((await t.request('POST', '/api/api-keys', { token: user.token, body })).status).toBe(400);
      }
      expect((await t.request('GET', '/api/api-keys', { token: user.token })).body).toHaveLength(1);
      expect((await t.request('POST', '/api/api-keys', { body: { name: 'x' } })).status).toBe(401);
      expect((await t.request('GET', '/api/api-keys')).status).toBe(401);
    });

    test('a key authenticates key routes; last_used_at is written at most once a minute', async () => {
      // A statement-level trigger counts every UPDATE statement on api_keys, even one changing no row.
      for (const q of [
        'create table key_updates (n int not null)',
        'insert into key_updates values (0)',
        'create function count_key_updates() returns trigger language plpgsql as $$ begin update key_updates set n = n + 1; return null; end $$',
        'create trigger count_key_updates after update on api_keys for each statement execute function count_key_updates()',
      ])
        await t.ctx.database.query(sql.raw(q));
      const updates = async () => (await t.ctx.database.query<{ n: number }>(sql`select n from key_updates`))[0]!.n;

      const key = await t.services.accounts.createApiKey(user.id, 'use');
      const first = await whoAmI(key.key);
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ userId: user.id, via: 'key', keyId: key.id, sessionId: null });
      const firstUse = clock.now().toISOString();
      await waitFor(async () => (await lastUsed(key.id)) !== null, 'the first use to be written');
      expect(new Date((await lastUsed(key.id))!).toISOString()).toBe(firstUse);

      clock.advance(30_000);
      for (let i = 0; i < 5; i++) expect((await whoAmI(key.key)).status).toBe(200);
      clock.advance(31_000);
      expect((await whoAmI(key.key)).status).toBe(200);
      const later = clock.now().toISOString();
      await waitFor(async () => new Date((await lastUsed(key.id))!).toISOString() === later, 'the later use to be written');
      expect(new Date((await lastUsed(key.id))!).toISOString()).toBe(later);
      // Seven uses, two writes: the first use and the first one a minute later.
      expect(await updates()).toBe(2);
      const listed = (await t.request('GET', '/api/api-keys', { token: user.token })).body.find((k: { id: string }) => k.id === key.id);
      expect(listed.last_used_at).toBe(later);
    });

    test('delete answers 204 and the key is refused at once; another account\'s key or an unknown id is 404', async () => {
      const key = await t.services.accounts.createApiKey(user.id, 'doomed');
      expect((await whoAmI(key.key)).status).toBe(200); // now cached
      const foreign = await t.request('DELETE', `/api/api-keys/${key.id}`, { token: other.token });
      expect(foreign.status).toBe(404);
      expect(foreign.body).toEqual({ error: expect.any(String) });
      expect((await whoAmI(key.key)).status).toBe(200);

      const del = await t.request('DELETE', `/api/api-keys/${key.id}`, { token: user.token });
      expect(del.status).toBe(204);
      expect(del.text).toBe('');
      const after = await whoAmI(key.key);
      expect(after.status).toBe(401);
      expect(after.body).toEqual({ error: expect.any(String) });
      expect((await t.request('DELETE', `/api/api-keys/${key.id}`, { token: user.token })).status).toBe(404);
      expect((await t.request('DELETE', '/api/api-keys/key_nope', { token: user.token })).status).toBe(404);
      expect((await t.request('GET', '/api/api-keys', { token: user.token })).body.map((k: { id: string }) => k.id)).not.toContain(key.id);
    });

    test('a revoke through a second service on the same database reaches this one through NOTIFY', async () => {
      const key = await t.services.accounts.createApiKey(user.id, 'shared');
      expect((await whoAmI(key.key)).status).toBe(200); // cached here
      const second = await createTestContext(kind, {}, { testDb: t.testDb });
      try {
        await createAccountsService(second.ctx).revokeApiKey(user.id, key.id);
        // In one process the two LISTEN connections race each other; across processes the very next
        // request is checked (tests/modules/accounts/revoke.e2e.test.ts). Here: within a deadline.
        await waitFor(async () => (await whoAmI(key.key)).status !== 200, 'the revocation to reach this process');
        expect((await whoAmI(key.key)).status).toBe(401);
      } finally {
        await second.close();
      }
    });

    test('a key issued by the other site is refused', async () => {
      const cn = await createTestContext(kind, { SITE: 'cn' }, { testDb: t.testDb });
      try {
        const cnKey = await createAccountsService(cn.ctx).createApiKey(user.id, 'cn key');
        expect((await whoAmI(cnKey.key)).status).toBe(401);
        expect((await t.request('GET', '/api/api-keys', { token: user.token })).body.map((k: { id: string }) => k.id)).not.toContain(cnKey.id);
      } finally {
        await cn.close();
      }
    });

    test('malformed and unknown keys are 401', async () => {
      for (const key of ['bfvk-short', `bfvk-${'A'.repeat(40)}`, `bfvk-${'A'.repeat(41)}`]) expect((await whoAmI(key)).status).toBe(401);
    });
  });
}

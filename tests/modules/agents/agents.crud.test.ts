import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { ANONYMOUS_UNLIMITED } from './agents.helpers';
import { DB_KINDS } from '../../support/db';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

for (const kind of DB_KINDS) {
  describe(`agents and sessions CRUD (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(kind, { RATE_LIMITS: ANONYMOUS_UNLIMITED });
    });
    afterAll(() => t.close());

    const count = async (table: string) => {
      const [row] = await t.ctx.database.query<{ n: number }>(sql.raw(`select count(*)::int as n from ${table}`));
      return row!.n;
    };

    test('an agent is created, read, updated, listed and deleted', async () => {
      const tools = [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: {} } }];
      const created = await t.request('POST', '/v1/agents', {
        body: { model: 'fake-model', name: 'helper', instructions: 'Be brief.', tools, metadata: { team: 'a' } },
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ object: 'agent', name: 'helper', model: 'fake-model', instructions: 'Be brief.', tools, metadata: { team: 'a' } });
      expect(created.body.id).toMatch(/^agent_/);
      expect(created.body.created_at).toMatch(ISO);
      expect(created.body.updated_at).toMatch(ISO);

      const got = await t.request('GET', `/v1/agents/${created.body.id}`);
      expect(got.body).toEqual(created.body);

      const updated = await t.request('POST', `/v1/agents/${created.body.id}`, { body: { name: null, metadata: { team: 'b' } } });
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({ name: null, model: 'fake-model', instructions: 'Be brief.', metadata: { team: 'b' } });

      const deleted = await t.request('DELETE', `/v1/agents/${created.body.id}`);
      expect(deleted.body).toEqual({ id: created.body.id, object: 'agent.deleted', deleted: true });
      expect((await t.request('GET', `/v1/agents/${created.body.id}`)).status).toBe(404);
      expect((await t.request('DELETE', `/v1/agents/${created.body.id}`)).status).toBe(404);
    });

    test('bad agent input is 400 and creates nothing', async () => {
      const before = await count('agents');
      const tooMany = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
      for (const body of [
        { name: 'no model' },
        { model: '' },
        { model: 'm', metadata: tooMany },
        { model: 'm', metadata: { ['k'.repeat(65)]: 'v' } },
        { model: 'm', metadata: { k: 'v'.repeat(513) } },
        { model: 'm', metadata: { k: 1 } },
        { model: 'm', tools: [{ type: 'web_search' }] },
        { model: 'm', tools: [{ type: 'function' }] },
      ]) {
        const res = await t.request('POST', '/v1/agents', { body });
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      expect(await count('agents')).toBe(before);
      // The limits themselves are allowed.
      const edge = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`${i}`.padEnd(64, 'k'), 'v'.repeat(512)]));
      expect((await t.request('POST', '/v1/agents', { body: { model: 'm', metadata: edge } })).status).toBe(201);
    });

    test('an update with bad input changes nothing', async () => {
      const agent = (await t.request('POST', '/v1/agents', { body: { model: 'm', metadata: { a: '1' } } })).body;
      expect((await t.request('POST', `/v1/agents/${agent.id}`, { body: { model: null } })).status).toBe(400);
      expect((await t.request('POST', `/v1/agents/${agent.id}`, { body: { metadata: { ['k'.repeat(65)]: 'v' } } })).status).toBe(400);
      expect((await t.request('POST', '/v1/agents/agent_missing', { body: { name: 'x' } })).status).toBe(404);
      expect((await t.request('GET', `/v1/agents/${agent.id}`)).body).toEqual(agent);
    });

    test('sessions are created from an agent, snapshot it, and follow the session shape', async () => {
      const agent = (await t.request('POST', '/v1/agents', { body: { model: 'm1', instructions: 'x' } })).body;
      const created = await t.request('POST', '/v1/agents/sessions', { body: { agent_id: agent.id, metadata: { user: 'u1' } } });
      expect(created.status).toBe(201);
      const s = created.body;
      expect(s.id).toMatch(/^sess_/);
      expect(s).toMatchObject({
        object: 'agent.session',
        agent: { id: agent.id, model: 'm1', instructions: 'x', tools: [] },
        status: 'idle',
        error: null,
        required_actions: [],
        usage: { input_tokens: 0, output_tokens: 0, total_tokens: 0 },
        metadata: { user: 'u1' },
      });
      expect(s.created_at).toMatch(ISO);
      expect(s.last_active_at).toMatch(ISO);

      // Changing the agent later does not change the session's snapshot.
      await t.request('POST', `/v1/agents/${agent.id}`, { body: { model: 'm2' } });
      expect((await t.request('GET', `/v1/agents/sessions/${s.id}`)).body.agent.model).toBe('m1');

      const updated = await t.request('POST', `/v1/agents/sessions/${s.id}`, { body: { metadata: { user: 'u2' } } });
      expect(updated.body.metadata).toEqual({ user: 'u2' });

      const deleted = await t.request('DELETE', `/v1/agents/sessions/${s.id}`);
      expect(deleted.body).toEqual({ id: s.id, object: 'agent.session.deleted', deleted: true });
      expect((await t.request('GET', `/v1/agents/sessions/${s.id}`)).status).toBe(404);
    });

    test('bad session input is 400 or 404 and creates nothing', async () => {
      const agent = (await t.request('POST', '/v1/agents', { body: { model: 'm' } })).body;
      const before = await count('agent_sessions');
      expect((await t.request('POST', '/v1/agents/sessions', { body: {} })).status).toBe(400);
      expect((await t.request('POST', '/v1/agents/sessions', { body: { agent_id: 'agent_nope' } })).status).toBe(404);
      const big = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
      expect((await t.request('POST', '/v1/agents/sessions', { body: { agent_id: agent.id, metadata: big } })).status).toBe(400);
      expect(await count('agent_sessions')).toBe(before);
      expect((await t.request('GET', '/v1/agents/sessions/sess_nope')).status).toBe(404);
      expect((await t.request('DELETE', '/v1/agents/sessions/sess_nope')).status).toBe(404);
      expect((await t.request('POST', '/v1/agents/sessions/sess_nope', { body: { metadata: {} } })).status).toBe(404);
    });

    test('lists page with limit, after and order, and refuse bad parameters', async () => {
      const mark = `list-${kind}-${Date.now()}`;
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await t.request('POST', '/v1/agents', { body: { model: 'm', name: `${mark}-${i}` } })).body.id);

      const first = await t.request('GET', '/v1/agents?limit=2');
      expect(first.body).toMatchObject({ object: 'list', has_more: true, first_id: ids[4], last_id: ids[3] });
      expect(first.body.data.map((a: { id: string }) => a.id)).toEqual([ids[4], ids[3]]);
      const second = await t.request('GET', `/v1/agents?limit=2&after=${ids[3]}`);
      expect(second.body.data.map((a: { id: string }) => a.id)).toEqual([ids[2], ids[1]]);

      const asc = await t.request('GET', `/v1/agents?order=asc&limit=100&after=${ids[0]}`);
      expect(asc.body.data.map((a: { id: string }) => a.id)).toEqual(ids.slice(1));
      expect(asc.body.has_more).toBe(false);

      for (let i = 0; i < 16; i++) await t.request('POST', '/v1/agents', { body: { model: 'm' } });
      const all = await t.request('GET', '/v1/agents');
      expect(all.body.data.length).toBe(20);
      expect(all.body.has_more).toBe(true);

      for (const q of ['limit=0', 'limit=101', 'limit=abc', 'limit=1.5', 'order=up', 'after=agent_unknown']) {
        const res = await t.request('GET', `/v1/agents?${q}`);
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      const empty = await t.request('GET', '/v1/agents/sessions?agent_id=agent_none');
      expect(empty.body).toEqual({ object: 'list', data: [], has_more: false, first_id: null, last_id: null });
    });

    test('sessions list filters by agent', async () => {
      const a = (await t.request('POST', '/v1/agents', { body: { model: 'm' } })).body;
      const b = (await t.request('POST', '/v1/agents', { body: { model: 'm' } })).body;
      const s1 = (await t.request('POST', '/v1/agents/sessions', { body: { agent_id: a.id } })).body;
      await t.request('POST', '/v1/agents/sessions', { body: { agent_id: b.id } });
      const listed = await t.request('GET', `/v1/agents/sessions?agent_id=${a.id}`);
      expect(listed.body.data.map((s: { id: string }) => s.id)).toEqual([s1.id]);
    });

    test('vaults, environments and artifacts are recognized but answer 501', async () => {
      for (const [method, path] of [
        ['GET', '/v1/vaults'],
        ['POST', '/v1/vaults'],
        ['GET', '/v1/vaults/v_1/credentials'],
        ['GET', '/v1/agents/environments'],
        ['DELETE', '/v1/agents/environments/env_1'],
        ['GET', '/v1/agents/sessions/sess_1/artifacts'],
        ['GET', '/v1/agents/sessions/sess_1/artifacts/art_1/content'],
      ] as const) {
        const res = await t.request(method, path);
        expect(res.status).toBe(501);
        expect(res.body).toEqual({ error: expect.any(String) });
        expect(res.headers.get('content-type')).toContain('application/json');
      }
    });
  });
}

import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeApiKey, makeUser } from '../../support/make';

const CLOUD_KEY = 'agent-cloud-key-0123456789';

for (const kind of DB_KINDS) {
  describe(`agent API auth with AGENT_CLOUD_API_KEY set (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(kind, { AGENT_CLOUD_API_KEY: CLOUD_KEY });
    });
    afterAll(() => t.close());

    test('no key, a wrong key or a malformed header is 401 on every agent route', async () => {
      const headerSets: Record<string, string>[] = [{}, { authorization: 'Bearer wrong' }, { authorization: `Basic ${CLOUD_KEY}` }, { authorization: CLOUD_KEY }];
      for (const headers of headerSets) {
        for (const [method, path] of [
          ['GET', '/v1/agents'],
          ['POST', '/v1/agents'],
          ['GET', '/v1/agents/sessions/sess_x'],
          ['POST', '/v1/agents/sessions/sess_x/events'],
          ['GET', '/v1/vaults'],
        ] as const) {
          const res = await t.request(method, path, { headers, body: method === 'POST' ? { model: 'm' } : undefined });
          expect(res.status).toBe(401);
          expect(res.body).toEqual({ error: expect.any(String) });
        }
      }
    });

    test('the cloud key works as Bearer and as ApiKey, in the shared workspace', async () => {
      const viaBearer = await t.request('POST', '/v1/agents', { headers: { authorization: `Bearer ${CLOUD_KEY}` }, body: { model: 'm' } });
      expect(viaBearer.status).toBe(201);
      const viaApiKey = await t.request('GET', `/v1/agents/${viaBearer.body.id}`, { headers: { authorization: `ApiKey ${CLOUD_KEY}` } });
      expect(viaApiKey.status).toBe(200);
      expect(viaApiKey.body.id).toBe(viaBearer.body.id);
    });

    test('a bfvk- key of this site works, sees only its owner\'s workspace, and stops working once revoked', async () => {
      const user = await makeUser(t);
      const key = await makeApiKey(t, user.id);
      const shared = (await t.request('POST', '/v1/agents', { headers: { authorization: `Bearer ${CLOUD_KEY}` }, body: { model: 'm' } })).body;

      const mine = await t.request('POST', '/v1/agents', { headers: { authorization: `ApiKey ${key.key}` }, body: { model: 'm' } });
      expect(mine.status).toBe(201);
      const listed = await t.request('GET', '/v1/agents?limit=100', { token: key.key });
      expect(listed.body.data.map((a: { id: string }) => a.id)).toEqual([mine.body.id]);
      expect((await t.request('GET', `/v1/agents/${shared.id}`, { token: key.key })).status).toBe(404);
      expect((await t.request('GET', `/v1/agents/${mine.body.id}`, { token: CLOUD_KEY })).status).toBe(404);
      // Another account's key sees neither.
      const other = await makeApiKey(t, (await makeUser(t)).id);
      expect((await t.request('GET', `/v1/agents/${mine.body.id}`, { token: other.key })).status).toBe(404);
      expect((await t.request('POST', '/v1/agents/sessions', { token: other.key, body: { agent_id: mine.body.id } })).status).toBe(404);

      const revoked = await t.request('DELETE', `/api/api-keys/${key.id}`, { token: user.token });
      expect(revoked.status).toBe(204);
      expect((await t.request('GET', '/v1/agents', { token: key.key })).status).toBe(401);
    });
  });

  describe(`agent API auth with AGENT_CLOUD_API_KEY unset (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(kind);
    });
    afterAll(() => t.close());

    test('no credential is needed, and any non-key header is ignored', async () => {
      const created = await t.request('POST', '/v1/agents', { body: { model: 'm' } });
      expect(created.status).toBe(201);
      const res = await t.request('GET', `/v1/agents/${created.body.id}`, { headers: { authorization: 'Bearer anything' } });
      expect(res.status).toBe(200);
    });

    test('a bfvk- key is still checked: a valid one selects its owner, an unknown one is 401', async () => {
      const user = await makeUser(t);
      const key = await makeApiKey(t, user.id);
      const mine = await t.request('POST', '/v1/agents', { token: key.key, body: { model: 'm' } });
      expect(mine.status).toBe(201);
      expect((await t.request('GET', `/v1/agents/${mine.body.id}`)).status).toBe(404);
      expect((await t.request('GET', '/v1/agents', { token: 'bfvk-unknownunknownunknownunknownunknown0' })).status).toBe(401);
    });
  });

  describe(`anonymous agent callers in open mode (${kind})`, () => {
    let t: TestApp;
    const from = (address: string) => ({ 'x-forwarded-for': address });
    beforeAll(async () => {
      t = await createTestApp(kind, { TRUST_PROXY: 'true', RATE_LIMITS: 'agents_anonymous=5/1h' });
    });
    afterAll(() => t.close());

    test('each client address has its own workspace: no anonymous caller sees another one\'s agents or sessions', async () => {
      const a = await t.request('POST', '/v1/agents', { headers: from('203.0.113.1'), body: { model: 'm' } });
      const session = await t.request('POST', '/v1/agents/sessions', { headers: from('203.0.113.1'), body: { agent_id: a.body.id } });
      expect(session.status).toBe(201);
      const b = from('203.0.113.2');
      expect((await t.request('GET', '/v1/agents?limit=100', { headers: b })).body.data).toEqual([]);
      expect((await t.request('GET', `/v1/agents/sessions/${session.body.id}`, { headers: b })).status).toBe(404);
      expect((await t.request('GET', '/v1/agents/sessions', { headers: b })).body.data).toEqual([]);
      // The same address sees its own.
      expect((await t.request('GET', `/v1/agents/sessions/${session.body.id}`, { headers: from('203.0.113.1') })).status).toBe(200);
    });

    test('anonymous callers are rate limited per address (agents_anonymous); other addresses and key holders are not', async () => {
      const c = from('203.0.113.3');
      for (let i = 0; i < 5; i++) expect((await t.request('GET', '/v1/agents', { headers: c })).status).toBe(200);
      const limited = await t.request('POST', '/v1/agents', { headers: c, body: { model: 'm' } });
      expect(limited.status).toBe(429);
      expect(limited.body).toEqual({ error: expect.any(String) });
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await t.request('GET', '/v1/agents', { headers: from('203.0.113.4') })).status).toBe(200);
      const key = await makeApiKey(t, (await makeUser(t)).id);
      expect((await t.request('GET', '/v1/agents', { headers: c, token: key.key })).status).toBe(200);
    });
  });
}

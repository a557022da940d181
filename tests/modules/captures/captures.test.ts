/**
 * Captured requests through the real gateway (the official openai client, a fake upstream that
 * speaks OpenAI's protocol), with the local file store: off by default, on for a key, by admin
 * rules; what is stored (sealed, no credentials); who reads it; replay; expiry.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { fundedUser, type Harness, waitFor } from '../gateway/gateway-harness';
import { manualClock } from '../../support/clock';
import { createTestContext } from '../../support/app';
import { makeUser } from '../../support/make';
import { buildApp } from '../../../src/app';
import { UPSTREAM_KEY, captureRows, capturingUser, ledgerMatches, rawObject, replay, settle, startCaptureHarness } from './captures-harness';

const clock = manualClock();
let h: Harness;

beforeAll(async () => {
  h = await startCaptureHarness({ clock });
});
afterAll(async () => {
  await h.close();
});

const detail = (token: string, id: string) => h.t.request<Record<string, any>>('GET', `/api/captures/${id}`, { token });

describe('capture', () => {
  test('off by default: a key without capture and no rules store nothing', async () => {
    const u = await fundedUser(h, 1_000_000n);
    await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
    await u.client.embeddings.create({ model: 'm1', input: 'hello' });
    await settle(h);
    expect(await captureRows(h, u.user.id)).toEqual([]);
    const keys = await h.t.request('GET', '/api/api-keys', { token: u.user.token });
    expect(keys.body[0].capture).toBe(false);
    expect((await h.t.request('GET', '/api/captures', { token: u.user.token })).body).toEqual({ captures: [], next_cursor: null });
  });

  test('a capturing key: chat JSON and streamed, embeddings, Responses JSON and streamed, each with its usage row; sealed at rest; no credentials', async () => {
    h.up.reset();
    h.up.set({ content: 'alpha beta gamma' });
    const u = await capturingUser(h);
    const chat = await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'secret-prompt-words' }] });
    const stream = await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'streamed please' }], stream: true });
    let streamedText = '';
    for await (const c of stream) streamedText += c.choices[0]?.delta?.content ?? '';
    await u.capturing.embeddings.create({ model: 'm1', input: ['one', 'two'] });
    const resp = await u.capturing.responses.create({ model: 'm1', input: 'responses json' });
    const rstream = await u.capturing.responses.create({ model: 'm1', input: 'responses stream', stream: true });
    for await (const _ of rstream);
    // The uncaptured key of the same user stays uncaptured.
    await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'not me' }] });
    await settle(h);

    const rows = await captureRows(h, u.user.id);
    expect(rows.map((r) => [r.endpoint, r.streamed, r.key_id])).toEqual([
      ['chat', false, u.captureKey.id],
      ['chat', true, u.captureKey.id],
      ['embeddings', false, u.captureKey.id],
      ['responses', false, u.captureKey.id],
      ['responses', true, u.captureKey.id],
    ]);
    const usage = await h.t.ctx.database.query<Record<string, any>>(sql`select * from router_usage where key_id = ${u.captureKey.id} order by created_at, id`);
    expect(rows.map((r) => r.usage_id)).toEqual(usage.map((r) => r.id));
    for (const [i, r] of rows.entries()) {
      expect(r).toMatchObject({ status: 200, model: 'm1', entrypoint: 'm1', backend: h.up.url, replay_of: null, request_truncated: false, response_truncated: false });
      expect(r.cost_micros).toBe(usage[i]!.cost_micros);
      expect(r.prompt_tokens).toBe(usage[i]!.prompt_tokens);
    }

    const list = await h.t.request('GET', '/api/captures', { token: u.user.token });
    expect(list.body.captures.map((c: { id: string }) => c.id)).toEqual(rows.map((r) => r.id).reverse());

    const one = await detail(u.user.token, rows[0]!.id);
    expect(one.status).toBe(200);
    expect(one.body.request).toEqual({ model: 'm1', messages: [{ role: 'user', content: 'secret-prompt-words' }] });
    expect(one.body.response.choices[0].message.content).toBe(chat.choices[0]!.message.content);
    expect(one.body.response.usage.cost).toBe((chat.usage as unknown as { cost: number }).cost);
    const streamed = await detail(u.user.token, rows[1]!.id);
    expect(streamed.body.request.stream).toBe(true);
    expect(streamed.body.response).toMatchObject({ text: streamedText, tool_calls: [], finish_reason: 'stop', usage: { prompt_tokens: 10, completion_tokens: 3 } });
    const embedded = await detail(u.user.token, rows[2]!.id);
    expect(embedded.body.response.data).toHaveLength(2);
    const responded = await detail(u.user.token, rows[3]!.id);
    expect(responded.body.request).toEqual({ model: 'm1', input: 'responses json' });
    expect(responded.body.response.output_text ?? responded.body.response.output[0].content[0].text).toBe(resp.output_text);
    expect((await detail(u.user.token, rows[4]!.id)).body.response.text).toBe('alpha beta gamma');

    // At rest: sealed, nothing readable; opened: no credential of any kind.
    for (const r of rows) {
      const raw = await rawObject(h, r.object_key);
      expect(raw).toStartWith('v1.');
      for (const plain of ['secret-prompt-words', 'alpha', 'streamed please', 'responses']) expect(raw).not.toContain(plain);
      const opened = JSON.stringify((await detail(u.user.token, r.id)).body);
      for (const secret of [u.captureKey.key, u.key.key, u.user.token, UPSTREAM_KEY, 'authorization', 'Bearer']) expect(opened).not.toContain(secret);
    }
  });

  test('tool calls and a failure are captured too', async () => {
    h.up.reset();
    const u = await capturingUser(h);
    h.up.set({ toolCalls: [{ id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' }] });
    const s = await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'weather?' }], stream: true, tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }] });
    for await (const _ of s);
    h.up.set({ status: 500 });
    const failed = await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'fail' }] }).then(() => 200, (e: { status: number }) => e.status);
    expect(failed).toBe(502);
    h.up.reset();
    await settle(h);
    const rows = await captureRows(h, u.user.id);
    expect(rows.map((r) => r.status)).toEqual([200, 502]);
    expect((await detail(u.user.token, rows[0]!.id)).body.response.tool_calls).toEqual([{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }]);
    expect((await detail(u.user.token, rows[1]!.id)).body.response.error).toContain('upstream');
  });

  test('a request body over 1 MiB is kept cut and marked; such a capture cannot be replayed', async () => {
    h.up.reset();
    const u = await capturingUser(h);
    const long = 'x'.repeat(1_100_000);
    await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: long }] });
    await settle(h);
    const [row] = await captureRows(h, u.user.id);
    expect(row).toMatchObject({ request_truncated: true, response_truncated: false });
    const shown = await detail(u.user.token, row!.id);
    expect(typeof shown.body.request).toBe('string');
    expect(shown.body.request.length).toBe(1 << 20);
    expect(shown.body.request).toStartWith('{"model":"m1","messages":[{"role":"user","content":"xxx');
    expect(shown.body.response.choices[0].message.content).toBe('Hello from the fake upstream.');
    const refused = await replay(h, u.captureKey.key, { capture_id: row!.id });
    expect(refused.status).toBe(409);
    expect(refused.json.error).toContain('cut at the size limit');
  });

  test('PATCH turns capture on and off for a key, at once', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const on = await h.t.request('PATCH', `/api/api-keys/${u.key.id}`, { token: u.user.token, body: { capture: true } });
    expect(on.status).toBe(200);
    expect(on.body.capture).toBe(true);
    await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'one' }] });
    expect((await h.t.request('PATCH', `/api/api-keys/${u.key.id}`, { token: u.user.token, body: { capture: false } })).body.capture).toBe(false);
    await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'two' }] });
    await settle(h);
    expect(await captureRows(h, u.user.id)).toHaveLength(1);
    expect((await h.t.request('PATCH', `/api/api-keys/${u.key.id}`, { token: u.user.token, body: { capture: 'yes' } })).status).toBe(400);
  });

  test('admin rules: sample 1 captures a user\'s requests without the key flag, sample 0 none; bad rules are 400 and change nothing', async () => {
    const admin = await makeUser(h.t, { admin: true });
    const u = await fundedUser(h, 1_000_000n);
    const other = await fundedUser(h, 1_000_000n);
    expect((await h.t.request('GET', '/api/admin/router/capture', { token: admin.token })).body).toEqual({ rules: [], retention_days: 30 });
    const put = await h.t.request('PUT', '/api/admin/router/capture', { token: admin.token, body: { rules: [{ user_id: u.user.id, model: 'm1', sample: 1 }, { model: 'm2', sample: 0 }], retention_days: 7 } });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ rules: [{ user_id: u.user.id, model: 'm1', sample: 1 }, { model: 'm2', sample: 0 }], retention_days: 7 });
    for (const body of [{ rules: [{ sample: 2 }], retention_days: 7 }, { rules: [], retention_days: 0 }, { rules: [], retention_days: 366 }, { rules: [{ sample: -1 }], retention_days: 1 }, { rules: 'x' }]) {
      const bad = await h.t.request('PUT', '/api/admin/router/capture', { token: admin.token, body });
      expect(bad.status).toBe(400);
      expect(typeof bad.body.error).toBe('string');
    }
    expect((await h.t.request('PUT', '/api/admin/router/capture', { token: u.user.token, body: { rules: [], retention_days: 1 } })).status).toBe(403);
    expect((await h.t.request('GET', '/api/admin/router/capture', { token: admin.token })).body.retention_days).toBe(7);

    for (let i = 0; i < 3; i++) await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: `m1 ${i}` }] });
    for (let i = 0; i < 3; i++) await u.client.chat.completions.create({ model: 'm2', messages: [{ role: 'user', content: `m2 ${i}` }] });
    await other.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'other' }] });
    await settle(h);
    const rows = await captureRows(h, u.user.id);
    expect(rows.map((r) => r.model)).toEqual(['m1', 'm1', 'm1']);
    expect(new Date(rows[0]!.expires_at).getTime() - new Date(rows[0]!.created_at).getTime()).toBe(7 * 86_400_000);
    expect(await captureRows(h, other.user.id)).toEqual([]);
    const audit = await h.t.request('GET', '/api/admin/audit?limit=10', { token: admin.token });
    expect(audit.body.entries.some((e: { action: string }) => e.action === 'router.capture')).toBe(true);
    await h.t.request('PUT', '/api/admin/router/capture', { token: admin.token, body: { rules: [], retention_days: 30 } });
  });

  test('lists and details are the owner\'s; filters; admin lists everyone\'s', async () => {
    const a = await capturingUser(h);
    const b = await capturingUser(h);
    const admin = await makeUser(h.t, { admin: true });
    await a.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'a1' }] });
    await a.capturing.chat.completions.create({ model: 'm2', messages: [{ role: 'user', content: 'a2' }] });
    await b.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'b1' }] });
    await settle(h);
    const [a1, a2] = await captureRows(h, a.user.id);
    const [b1] = await captureRows(h, b.user.id);
    const mine = await h.t.request('GET', '/api/captures', { token: a.user.token });
    expect(mine.body.captures.map((c: { id: string }) => c.id)).toEqual([a2!.id, a1!.id]);
    // With the capturing API key too.
    const byKey = await h.t.request('GET', '/api/captures?model=m2', { token: a.captureKey.key });
    expect(byKey.body.captures.map((c: { id: string }) => c.id)).toEqual([a2!.id]);
    expect((await h.t.request('GET', `/api/captures?key_id=${a.key.id}`, { token: a.user.token })).body.captures).toEqual([]);
    const paged = await h.t.request('GET', '/api/captures?limit=1', { token: a.user.token });
    expect(paged.body.captures).toHaveLength(1);
    const next = await h.t.request('GET', `/api/captures?limit=1&cursor=${paged.body.next_cursor}`, { token: a.user.token });
    expect(next.body.captures[0].id).toBe(a1!.id);
    expect((await h.t.request('GET', '/api/captures?from=nope', { token: a.user.token })).status).toBe(400);
    expect((await h.t.request('GET', '/api/captures?cursor=zzz', { token: a.user.token })).status).toBe(400);
    const foreign = await detail(a.user.token, b1!.id);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'capture not found' });
    expect((await h.t.request('GET', '/api/admin/captures', { token: a.user.token })).status).toBe(403);
    const all = await h.t.request('GET', `/api/admin/captures?user_id=${b.user.id}`, { token: admin.token });
    expect(all.body.captures.map((c: { id: string }) => c.id)).toEqual([b1!.id]);
    const everyone = await h.t.request('GET', '/api/admin/captures?limit=200', { token: admin.token });
    const ids = everyone.body.captures.map((c: { id: string }) => c.id);
    for (const id of [a1!.id, a2!.id, b1!.id]) expect(ids).toContain(id);
    expect((await h.t.request('GET', `/api/admin/captures/${b1!.id}`, { token: admin.token })).body.request.messages[0].content).toBe('b1');
  });
});

describe('replay', () => {
  test('same model, JSON: the original shape, X-Replay-Of, entrypoint replay, billed, itself captured', async () => {
    const u = await capturingUser(h);
    await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'again' }] });
    await settle(h);
    const [original] = await captureRows(h, u.user.id);
    const before = await u.balance();
    const r = await replay(h, u.captureKey.key, { capture_id: original!.id });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-replay-of')).toBe(original!.id);
    expect(r.json.object).toBe('chat.completion');
    expect(r.json.choices[0].message.content).toBe('Hello from the fake upstream.');
    expect(r.headers.get('x-cost')).toBe('0.015000');
    await settle(h);
    const rows = await captureRows(h, u.user.id);
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatchObject({ id: r.headers.get('x-capture-id'), replay_of: original!.id, entrypoint: 'replay', model: 'm1', endpoint: 'chat', streamed: false });
    const [usage] = await h.t.ctx.database.query<Record<string, any>>(sql`select * from router_usage where id = ${rows[1]!.usage_id}`);
    expect(usage).toMatchObject({ entrypoint: 'replay', model: 'm1', key_id: u.captureKey.id });
    expect(await u.balance()).toBe(before - 15_000n);
    expect(await ledgerMatches(h, u.user.id, await u.balance())).toBe(true);
    // Any key of the owner may replay; the detail shows the replay's own request and answer.
    expect((await replay(h, u.key.key, { capture_id: original!.id })).status).toBe(200);
    expect((await detail(u.user.token, rows[1]!.id)).body.request).toEqual({ model: 'm1', messages: [{ role: 'user', content: 'again' }] });
  });

  test('another model, streamed when the original was; a route works too; Responses and embeddings keep their shapes', async () => {
    h.up.reset();
    h.up.set({ content: 'one two three' });
    const u = await capturingUser(h);
    const s = await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'stream' }], stream: true });
    for await (const _ of s);
    await u.capturing.responses.create({ model: 'm1', input: 'resp' });
    await u.capturing.embeddings.create({ model: 'm1', input: 'emb' });
    await settle(h);
    const [chat, resp, emb] = await captureRows(h, u.user.id);
    const before = await u.balance();
    const r = await replay(h, u.captureKey.key, { capture_id: chat!.id, model: 'm2' });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    expect(r.headers.get('x-replay-of')).toBe(chat!.id);
    expect(r.frames.at(-1)).toBe('[DONE]');
    const chunks = r.frames.slice(0, -1).map((f) => JSON.parse(f));
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('one two three');
    expect(chunks.at(-1).usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 3, cost: 0.026 });
    expect(h.up.requests.filter((q) => q.path === '/v1/chat/completions').at(-1)!.body!.model).toBe('m2');
    const viaRoute = await replay(h, u.captureKey.key, { capture_id: resp!.id, model: 'auto' });
    expect(viaRoute.json).toMatchObject({ object: 'response', status: 'completed', model: 'm2' });
    const embedded = await replay(h, u.captureKey.key, { capture_id: emb!.id, model: 'm2' });
    expect(embedded.json).toMatchObject({ object: 'list', model: 'm2' });
    await settle(h);
    const replays = (await captureRows(h, u.user.id)).filter((c) => c.replay_of);
    expect(replays.map((c) => [c.replay_of, c.model, c.streamed, c.endpoint])).toEqual([
      [chat!.id, 'm2', true, 'chat'],
      [resp!.id, 'm2', false, 'responses'],
      [emb!.id, 'm2', false, 'embeddings'],
    ]);
    expect((await detail(u.user.token, replays[0]!.id)).body.response.text).toBe('one two three');
    const spent = replays.reduce((s, c) => s + BigInt(c.cost_micros), 0n);
    expect(spent).toBeGreaterThan(0n);
    expect(await u.balance()).toBe(before - spent);
    expect(await ledgerMatches(h, u.user.id, await u.balance())).toBe(true);
  });

  test('who may replay: another user\'s key 404, a plain session 403, an admin session any (billed to the admin); bad bodies 400', async () => {
    h.up.reset();
    const owner = await capturingUser(h);
    const stranger = await fundedUser(h, 1_000_000n);
    const admin = await fundedUser(h, 1_000_000n, { admin: true });
    await owner.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'mine' }] });
    await settle(h);
    const [original] = await captureRows(h, owner.user.id);
    const foreign = await replay(h, stranger.key.key, { capture_id: original!.id });
    expect(foreign.status).toBe(404);
    expect(foreign.json).toEqual({ error: 'capture not found' });
    expect((await replay(h, stranger.user.token, { capture_id: original!.id })).status).toBe(403);
    expect((await replay(h, owner.user.token, { capture_id: original!.id })).status).toBe(403);
    // An admin's API key is the admin's own scope.
    expect((await replay(h, admin.key.key, { capture_id: original!.id })).status).toBe(404);
    const ownerBefore = await owner.balance();
    const byAdmin = await replay(h, admin.user.token, { capture_id: original!.id, model: 'm2' });
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.headers.get('x-replay-of')).toBe(original!.id);
    await settle(h);
    expect(await owner.balance()).toBe(ownerBefore);
    expect(await admin.balance()).toBe(1_000_000n - 30_000n);
    const adminCaptures = await captureRows(h, admin.user.id);
    expect(adminCaptures.map((c) => [c.replay_of, c.key_id])).toEqual([[original!.id, null]]);
    for (const body of [{}, { capture_id: 5 }, { capture_id: original!.id, model: 7 }, { capture_id: original!.id, model: '' }]) {
      const bad = await replay(h, owner.captureKey.key, body);
      expect(bad.status).toBe(400);
      expect(typeof bad.json.error).toBe('string');
    }
    expect((await replay(h, owner.captureKey.key, { capture_id: 'cap_missing' })).status).toBe(404);
    expect((await replay(h, owner.captureKey.key, { capture_id: original!.id, model: 'nope' })).status).toBe(404);
    const unauth = await fetch(`${h.baseUrl}/v1/router/replay`, { method: 'POST', body: '{}' });
    expect(unauth.status).toBe(401);
  });
});

describe('retention', () => {
  test('the sweep deletes expired captures, objects first, then rows; unexpired ones stay', async () => {
    const admin = await makeUser(h.t, { admin: true });
    await h.t.request('PUT', '/api/admin/router/capture', { token: admin.token, body: { rules: [], retention_days: 1 } });
    const u = await capturingUser(h);
    await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'old' }] });
    await settle(h);
    await h.t.request('PUT', '/api/admin/router/capture', { token: admin.token, body: { rules: [], retention_days: 30 } });
    await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'new' }] });
    await settle(h);
    const [old, kept] = await captureRows(h, u.user.id);
    clock.advance(2 * 86_400_000);
    // Expired: no longer listed or readable even before the sweep runs.
    expect((await detail(u.captureKey.key, old!.id)).status).toBe(404);
    expect(await h.t.services.captures.sweep()).toBeGreaterThanOrEqual(1);
    expect(await h.t.services.store.exists(old!.object_key)).toBe(false);
    expect((await captureRows(h, u.user.id)).map((r) => r.id)).toEqual([kept!.id]);
    expect(await h.t.services.store.exists(kept!.object_key)).toBe(true);
    expect((await replay(h, u.captureKey.key, { capture_id: old!.id })).status).toBe(404);
  });

  test('another replica follows the capture rules; two replicas sweeping at once delete each expired capture once (one holds the lock)', async () => {
    // Replicas share the database and the object store.
    const second = await createTestContext('postgres', { STORAGE_URL: `file://${h.t.dataDir}/objects` }, { testDb: h.t.testDb, clock });
    const other = await buildApp(second.ctx);
    try {
      const admin = await makeUser(h.t, { admin: true });
      await h.t.request('PUT', '/api/admin/router/capture', { token: admin.token, body: { rules: [{ model: 'm2', sample: 1 }], retention_days: 30 } });
      await waitFor(() => other.services.captures.settings().rules.length === 1, 'the rules on the other replica', { timeoutMs: 10_000 });
      expect(other.services.captures.settings()).toEqual({ rules: [{ model: 'm2', sample: 1 }], retention_days: 30 });
      await h.t.request('PUT', '/api/admin/router/capture', { token: admin.token, body: { rules: [], retention_days: 30 } });
      const u = await capturingUser(h);
      for (let i = 0; i < 3; i++) await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: `r${i}` }] });
      await settle(h);
      const rows = await captureRows(h, u.user.id);
      clock.advance(31 * 86_400_000);
      // Every capture of this file's earlier tests has expired too.
      const [expired] = await h.t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from captures where expires_at < ${clock.now().toISOString()}::timestamptz`);
      expect(expired!.n).toBeGreaterThanOrEqual(rows.length);
      const [a, b] = await Promise.all([h.t.services.captures.sweep(), other.services.captures.sweep()]);
      expect(a + b).toBe(expired!.n);
      expect(await captureRows(h, u.user.id)).toEqual([]);
      for (const r of rows) expect(await h.t.services.store.exists(r.object_key)).toBe(false);
    } finally {
      await second.close();
    }
    // The other replica reloads the rules every 5 s.
  }, 20_000);
});

/**
 * Turns under concurrency and interruption (PostgreSQL only): ten sessions streaming at once,
 * one running turn per session, a client that disconnects mid-stream (the turn completes and is
 * persisted, docs/agents.md), a session deleted mid-turn (the upstream call is stopped), and a
 * streamed turn whose model pauses longer than the server's idle timeout.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { type AgentsHarness, getSession, isSettled, MODEL, newSession, parseSse, streamEvent, startAgentsApp } from './agents.helpers';
import { manualClock } from '../../support/clock';
import { waitFor } from '../../support/wait';

const LONG = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');

describe('agent turns under concurrency (postgres)', () => {
  let h: AgentsHarness;
  beforeAll(async () => {
    h = await startAgentsApp('postgres');
  });
  afterAll(() => h.close());

  test('ten sessions stream at once, each gets its whole answer', async () => {
    const { t, up } = h;
    up.reset();
    up.set({ content: 'one two three four five six seven eight', chunkDelayMs: 5 });
    const sessions = await Promise.all(Array.from({ length: 10 }, () => newSession(t, {})));
    const results = await Promise.all(sessions.map(({ session }) => streamEvent(t, session.id, { role: 'user', content: `hello ${session.id}` })));
    for (const res of results) {
      expect(res.status).toBe(200);
      const frames = parseSse(await res.text());
      expect(frames.at(-1)).toEqual({ event: 'turn.completed', data: {} });
      expect(frames.filter((f) => f.event === 'delta').map((f) => f.data.content).join('')).toBe('one two three four five six seven eight');
    }
    for (const { session } of sessions) expect((await getSession(t, session.id)).status).toBe('idle');
    expect(up.stats.streamsCompleted).toBe(10);
    // Each upstream request carried its own session's message.
    const asked = up.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body!.messages.at(-1).content);
    expect(asked.sort()).toEqual(sessions.map(({ session }) => `hello ${session.id}`).sort());
  });

  test('a second turn while one runs is 409 and is not recorded', async () => {
    const { t, up } = h;
    up.reset();
    // The first turn's upstream pauses after one frame until the test has tried the others.
    const gate = Promise.withResolvers<void>();
    up.set({ content: LONG, hold: { afterFrames: 1, until: gate.promise } });
    const { session } = await newSession(t, {});
    const first = await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { body: { role: 'user', content: 'first' } });
    expect(first.status).toBe(201);
    const second = await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { body: { role: 'user', content: 'second' } });
    expect(second.status).toBe(409);
    expect(second.body).toEqual({ error: expect.any(String) });
    const streamed = await t.request('POST', `/v1/agents/sessions/${session.id}/events/stream`, { body: { role: 'user', content: 'third' } });
    expect(streamed.status).toBe(409);
    gate.resolve();
    await waitFor(() => getSession(t, session.id), 'the first turn', { until: isSettled });
    const [row] = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from agent_events where session_id = ${session.id}`);
    expect(row!.n).toBe(1);
  });

  test('of two simultaneous messages to an idle session exactly one starts a turn', async () => {
    const { t, up } = h;
    up.reset();
    up.set({ content: 'ok', chunkDelayMs: 0 });
    const { session } = await newSession(t, {});
    const statuses = await Promise.all(
      ['a', 'b'].map(async (c) => (await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { body: { role: 'user', content: c } })).status),
    );
    expect(statuses.sort()).toEqual([201, 409]);
    await waitFor(() => getSession(t, session.id), 'the turn', { until: isSettled });
    expect((await t.request('GET', `/v1/agents/sessions/${session.id}/turns`)).body.data).toHaveLength(1);
  });

  test('a client that disconnects mid-stream: the turn completes and is persisted', async () => {
    const { t, up } = h;
    up.reset();
    const gate = Promise.withResolvers<void>();
    up.set({ content: LONG, hold: { afterFrames: 1, until: gate.promise } });
    const { session } = await newSession(t, {});
    const abort = new AbortController();
    const res = await streamEvent(t, session.id, { role: 'user', content: 'long please' }, { signal: abort.signal });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let seen = '';
    while (!seen.includes('event: delta')) {
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended before the first delta');
      seen += typeof value === 'string' ? value : decoder.decode(value);
    }
    abort.abort();
    await reader.cancel();
    // Still mid-turn when the client left (the upstream is paused until now).
    expect((await getSession(t, session.id)).status).toBe('in_progress');
    gate.resolve();

    const settled = await waitFor(() => getSession(t, session.id), 'the abandoned turn', { until: isSettled });
    expect(settled.status).toBe('idle');
    const items = await t.request('GET', `/v1/agents/sessions/${session.id}/items`);
    expect(items.body.data[0]).toMatchObject({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: LONG }] });
    expect((await t.request('GET', `/v1/agents/sessions/${session.id}/turns`)).body.data[0].status).toBe('completed');
    expect(up.stats.streamsCompleted).toBe(1);
    expect(up.stats.streamsAborted).toBe(0);
  });

  test('over a real socket: SSE headers on the wire, and a closed connection does not stop the turn', async () => {
    const { t, up } = h;
    up.reset();
    const gate = Promise.withResolvers<void>();
    up.set({ content: LONG, hold: { afterFrames: 1, until: gate.promise } });
    t.app.listen({ hostname: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${t.app.server!.port}`;
    // All over the socket: an anonymous caller's workspace is its client address.
    const api = async (method: string, path: string, body?: unknown) =>
      (await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })).json() as Promise<any>;
    const getSession = (id: string) => api('GET', `/v1/agents/sessions/${id}`);
    try {
      const agent = await api('POST', '/v1/agents', { model: MODEL });
      const session = await api('POST', '/v1/agents/sessions', { agent_id: agent.id });
      const abort = new AbortController();
      const res = await fetch(`${base}/v1/agents/sessions/${session.id}/events/stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ role: 'user', content: 'over the wire' }),
        signal: abort.signal,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toStartWith('text/event-stream');
      expect(res.headers.get('x-request-id')).toBeTruthy();
      const reader = res.body!.getReader();
      let text = '';
      while (!text.includes('\n\n')) {
        const { value, done } = await reader.read();
        if (done) throw new Error('stream ended before the first frame');
        text += new TextDecoder().decode(value);
      }
      expect(parseSse(text.slice(0, text.indexOf('\n\n') + 2))[0]!.event).toBe('delta');
      abort.abort();
      expect((await getSession(session.id)).status).toBe('in_progress');
      gate.resolve();
      expect((await waitFor(() => getSession(session.id), 'the turn', { until: isSettled })).status).toBe('idle');
      const items = await api('GET', `/v1/agents/sessions/${session.id}/items`);
      expect(items.data[0].content[0].text).toBe(LONG);
    } finally {
      await t.app.stop(true);
    }
  });

  test('deleting a session mid-turn stops its upstream call', async () => {
    const { t, up } = h;
    up.reset();
    const gate = Promise.withResolvers<void>(); // never opened: only the delete ends the upstream call
    up.set({ content: LONG, hold: { afterFrames: 1, until: gate.promise } });
    const { session } = await newSession(t, {});
    expect((await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { body: { role: 'user', content: 'go' } })).status).toBe(201);
    await waitFor(() => up.stats.streamsStarted, 'the upstream stream', { until: (n) => n === 1 });
    const deleted = await t.request('DELETE', `/v1/agents/sessions/${session.id}`);
    expect(deleted.status).toBe(200);
    await waitFor(() => up.stats.streamsAborted, 'the upstream abort', { until: (n) => n === 1 });
    expect(up.stats.streamsCompleted).toBe(0);
    const [row] = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from agent_turns where session_id = ${session.id}`);
    expect(row!.n).toBe(0);
  });
});

describe('a turn lost with its process (postgres)', () => {
  const clock = manualClock();
  let h: AgentsHarness;
  beforeAll(async () => {
    h = await startAgentsApp('postgres', {}, { clock });
  });
  afterAll(() => h.close());

  test('a turn still running after 15 minutes is marked failed and a new message is accepted', async () => {
    const { t, up } = h;
    // The first turn's upstream pauses until the replacing turn has answered: it stands for a turn
    // whose process was lost, and its late outcome must not land.
    const gate = Promise.withResolvers<void>();
    up.set({ content: LONG, hold: { afterFrames: 1, until: gate.promise } });
    const { session } = await newSession(t, {});
    expect((await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { body: { role: 'user', content: 'first' } })).status).toBe(201);
    expect((await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { body: { role: 'user', content: 'too soon' } })).status).toBe(409);

    clock.advance(15 * 60_000 + 1);
    up.set({ content: 'fresh answer', hold: null });
    expect((await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { body: { role: 'user', content: 'again' } })).status).toBe(201);
    expect((await waitFor(() => getSession(t, session.id), 'the new turn', { until: isSettled })).status).toBe('idle');

    // The replaced turn's late outcome is dropped: only the new answer is in the history.
    gate.resolve();
    await waitFor(() => up.stats.streamsCompleted + up.stats.streamsAborted, 'both upstream streams', { until: (n) => n === 2 });
    const turns = (await t.request('GET', `/v1/agents/sessions/${session.id}/turns?order=asc`)).body.data;
    expect(turns.map((x: any) => [x.status, x.error])).toEqual([
      ['failed', 'turn interrupted'],
      ['completed', null],
    ]);
    const items = (await t.request('GET', `/v1/agents/sessions/${session.id}/items?order=asc`)).body.data;
    expect(items.map((i: any) => i.content[0].text)).toEqual(['first', 'again', 'fresh answer']);
  });
});

describe('a streamed turn longer than the server\'s idle timeout (postgres)', () => {
  let h: AgentsHarness;
  beforeAll(async () => {
    h = await startAgentsApp('postgres', { ROUTER_FIRST_BYTE_TIMEOUT: '10s', ROUTER_REQUEST_TIMEOUT: '10s' });
  });
  afterAll(() => h.close());

  test('a model pausing longer than the idle timeout between chunks: the turn streams whole', async () => {
    const { t, up } = h;
    // The server closes connections silent for 2 s; the model pauses 2.5 s between chunks. The
    // turn's request may stay silent for its ROUTER_REQUEST_TIMEOUT and 5 s (without that: a reset).
    up.set({ content: 'one two', chunkDelayMs: 2_500, trailerAtOnce: true });
    t.app.listen({ hostname: '127.0.0.1', port: 0, idleTimeout: 2 });
    const base = `http://127.0.0.1:${t.app.server!.port}`;
    const api = async (path: string, body: unknown) =>
      fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    try {
      const agent = (await (await api('/v1/agents', { model: MODEL })).json()) as { id: string };
      const session = (await (await api('/v1/agents/sessions', { agent_id: agent.id })).json()) as { id: string };
      const res = await api(`/v1/agents/sessions/${session.id}/events/stream`, { role: 'user', content: 'take your time' });
      expect(res.status).toBe(200);
      const frames = parseSse(await res.text());
      expect(frames.filter((f) => f.event === 'delta').map((f) => f.data.content).join('')).toBe('one two');
      expect(frames.at(-1)).toEqual({ event: 'turn.completed', data: {} });
    } finally {
      await t.app.stop(true);
    }
  }, 30_000);
});

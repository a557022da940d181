/**
 * Full conversations with tool calls through the real router and a fake upstream: non-streaming
 * (POST …/events, turn in the background) and streaming (POST …/events/stream, SSE), the history
 * reads, failures, and the bad inputs that must change nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { DB_KINDS } from '../../support/db';
import { makeApiKey, makeUser } from '../../support/make';
import { type AgentsHarness, getSession, isSettled, newSession, parseSse, streamEvent, startAgentsApp, WEATHER_TOOL, weatherBehaviour } from './agents.helpers';
import { waitFor } from '../../support/wait';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

for (const kind of DB_KINDS) {
  describe(`agent conversations (${kind})`, () => {
    let h: AgentsHarness;
    beforeAll(async () => {
      h = await startAgentsApp(kind);
    });
    afterAll(() => h.close());

    const eventCount = async (sessionId: string) => {
      const [row] = await h.t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from agent_events where session_id = ${sessionId}`);
      return row!.n;
    };

    test('non-streaming: user message → tool call → tool result → answer, billed to the key owner', async () => {
      const { t, up } = h;
      up.reset();
      up.set(weatherBehaviour);
      const user = await makeUser(t);
      const key = await makeApiKey(t, user.id);
      await t.services.billing.credit(t.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 10_000_000n, reference: `seed-${user.id}`, description: 'test' });
      const { session } = await newSession(t, { instructions: 'You report the weather.', tools: [WEATHER_TOOL] }, key.key);

      const posted = await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { token: key.key, body: { role: 'user', content: 'Weather in Paris?' } });
      expect(posted.status).toBe(201);
      expect(Object.keys(posted.body).sort()).toEqual(['created_at', 'id', 'session_id', 'type']);
      expect(posted.body).toMatchObject({ session_id: session.id, type: 'message' });
      expect(posted.body.id).toMatch(/^evt_/);
      expect(posted.body.created_at).toMatch(ISO);

      const waiting = await waitFor(() => getSession(t, session.id, key.key), 'the first turn', { until: isSettled });
      expect(waiting.status).toBe('requires_action');
      expect(waiting.required_actions).toEqual([
        { type: 'function_call', call_id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}', turn_id: expect.stringMatching(/^turn_/) },
      ]);
      // What the model saw: the instructions, the user message and the agent's tools.
      const first = up.requests.at(-1)!.body!;
      expect(first.messages).toEqual([
        { role: 'system', content: 'You report the weather.' },
        { role: 'user', content: 'Weather in Paris?' },
      ]);
      expect(first.tools).toEqual([{ type: 'function', function: { name: 'get_weather', description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.parameters } }]);

      // While tool calls are pending: a new message is 409, a result for an unknown call 400; neither is recorded.
      const before = await eventCount(session.id);
      expect((await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { token: key.key, body: { role: 'user', content: 'hello?' } })).status).toBe(409);
      const unknown = await t.request('POST', `/v1/agents/sessions/${session.id}/events`, {
        token: key.key,
        body: { role: 'tool', tool_call_results: [{ call_id: 'call_nope', output: 'x' }] },
      });
      expect(unknown.status).toBe(400);
      expect(unknown.body).toEqual({ error: expect.any(String) });
      expect(await eventCount(session.id)).toBe(before);
      expect((await getSession(t, session.id, key.key)).status).toBe('requires_action');

      const answered = await t.request('POST', `/v1/agents/sessions/${session.id}/events`, {
        token: key.key,
        body: { role: 'tool', tool_call_results: [{ call_id: 'call_w1', output: '{"temp":21}' }] },
      });
      expect(answered.status).toBe(201);
      expect(answered.body.type).toBe('tool_result');
      const done = await waitFor(() => getSession(t, session.id, key.key), 'the second turn', { until: isSettled });
      expect(done).toMatchObject({ status: 'idle', error: null, required_actions: [] });
      // Two turns of 10 prompt tokens; 1 completion token for the call, 5 for the sentence.
      expect(done.usage).toEqual({ input_tokens: 20, output_tokens: 6, total_tokens: 26 });

      expect(up.requests.at(-1)!.body!.messages).toEqual([
        { role: 'system', content: 'You report the weather.' },
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_w1', content: '{"temp":21}' },
      ]);

      const items = await t.request('GET', `/v1/agents/sessions/${session.id}/items?order=asc`, { token: key.key });
      expect(items.body.object).toBe('list');
      expect(items.body.data.map((i: any) => i.type)).toEqual(['message', 'function_call', 'function_call_output', 'message']);
      expect(items.body.data[0]).toMatchObject({ role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] });
      expect(items.body.data[1]).toMatchObject({ call_id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' });
      expect(items.body.data[2]).toMatchObject({ call_id: 'call_w1', output: '{"temp":21}' });
      expect(items.body.data[3]).toMatchObject({ role: 'assistant', content: [{ type: 'output_text', text: 'It is sunny in Paris.' }] });

      const turns = await t.request('GET', `/v1/agents/sessions/${session.id}/turns?order=asc`, { token: key.key });
      expect(turns.body.data).toHaveLength(2);
      for (const turn of turns.body.data) {
        expect(turn).toMatchObject({ object: 'agent.session.turn', session_id: session.id, status: 'completed', error: null });
        expect(turn.completed_at).toMatch(ISO);
      }
      expect(turns.body.data[1].usage).toEqual({ input_tokens: 10, output_tokens: 5, total_tokens: 15 });
      const one = await t.request('GET', `/v1/agents/sessions/${session.id}/turns/${turns.body.data[0].id}`, { token: key.key });
      expect(one.body).toEqual(turns.body.data[0]);
      expect((await t.request('GET', `/v1/agents/sessions/${session.id}/turns/turn_nope`, { token: key.key })).status).toBe(404);

      // Nothing pending any more: 409.
      const late = await t.request('POST', `/v1/agents/sessions/${session.id}/events`, {
        token: key.key,
        body: { role: 'tool', tool_call_results: [{ call_id: 'call_w1', output: 'again' }] },
      });
      expect(late.status).toBe(409);

      // Billed like the gateway: 26 tokens at 1000 micro-units each.
      await waitFor(() => t.services.billing.getBalanceMicros(user.id), 'the wallet debits', { until: (b) => b === 10_000_000n - 26_000n });
      // The router's usage rows name the turns that made them.
      await t.services.router.flushUsage();
      const usage = await t.ctx.database.query<{ request_id: string }>(sql`select request_id from router_usage where user_id = ${user.id}`);
      expect(usage.map((u) => u.request_id).sort()).toEqual(turns.body.data.map((x: any) => x.id).sort());
    });

    test('streaming: SSE frames for the tool call, then the answer in deltas', async () => {
      const { t, up } = h;
      up.reset();
      up.set(weatherBehaviour);
      const { session } = await newSession(t, { tools: [WEATHER_TOOL] });

      const first = await streamEvent(t, session.id, { role: 'user', content: 'Weather in Paris?' });
      expect(first.status).toBe(200);
      expect(first.headers.get('content-type')).toStartWith('text/event-stream');
      const firstFrames = parseSse(await first.text());
      expect(firstFrames).toEqual([
        { event: 'tool_calls', data: { tool_calls: [{ id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] } },
        { event: 'turn.completed', data: {} },
      ]);
      // The stream ends after the state is stored: the session already waits for the result.
      expect((await getSession(t, session.id)).status).toBe('requires_action');

      const second = await streamEvent(t, session.id, { role: 'tool', tool_call_results: [{ tool_call_id: 'call_w1', content: { temp: 21 } }] });
      const text = await second.text();
      const frames = parseSse(text);
      expect(frames.at(-1)).toEqual({ event: 'turn.completed', data: {} });
      const deltas = frames.slice(0, -1);
      expect(deltas.length).toBe(5);
      expect(deltas.every((f) => f.event === 'delta')).toBe(true);
      expect(deltas.map((f) => f.data.content).join('')).toBe('It is sunny in Paris.');
      expect(text).toContain('event: delta\ndata: {"content":"It "}\n\n');

      const s = await getSession(t, session.id);
      expect(s.status).toBe('idle');
      const items = await t.request('GET', `/v1/agents/sessions/${session.id}/items?order=asc`);
      expect(items.body.data.map((i: any) => i.type)).toEqual(['message', 'function_call', 'function_call_output', 'message']);
      expect(items.body.data[2].output).toBe('{"temp":21}');
    });

    test('a tool event that leaves calls unanswered starts no turn; the stream repeats what is pending', async () => {
      const { t, up } = h;
      up.reset();
      up.set({ toolCalls: [{ id: 'call_a', name: 'get_weather', arguments: '{"city":"A"}' }, { id: 'call_b', name: 'get_weather', arguments: '{"city":"B"}' }] });
      const { session } = await newSession(t, { tools: [WEATHER_TOOL] });
      parseSse(await (await streamEvent(t, session.id, { role: 'user', content: 'A and B?' })).text());
      const completions = up.stats.completions;

      const partial = parseSse(await (await streamEvent(t, session.id, { role: 'tool', tool_call_results: [{ call_id: 'call_a', output: 'rain' }] })).text());
      expect(partial.map((f) => f.event)).toEqual(['tool_calls', 'turn.completed']);
      expect(partial[0]!.data.tool_calls.map((c: any) => c.id)).toEqual(['call_b']);
      expect(up.stats.completions).toBe(completions);
      const s = await getSession(t, session.id);
      expect(s.status).toBe('requires_action');
      expect(s.required_actions.map((a: any) => a.call_id)).toEqual(['call_b']);

      up.set({ toolCalls: null, content: 'A rains, B too.' });
      const rest = await t.request('POST', `/v1/agents/sessions/${session.id}/events`, { body: { role: 'tool', tool_call_results: [{ call_id: 'call_b', output: 'rain' }] } });
      expect(rest.status).toBe(201);
      expect((await waitFor(() => getSession(t, session.id), 'the answer', { until: isSettled })).status).toBe('idle');
      const both = up.requests.at(-1)!.body!.messages.filter((m: any) => m.role === 'tool');
      expect(both.map((m: any) => m.tool_call_id)).toEqual(['call_a', 'call_b']);
    });

    test('an upstream failure sends error then turn.completed; the session fails, keeps its error, and recovers', async () => {
      const { t, up } = h;
      up.reset();
      up.set({ status: 500 });
      const { session } = await newSession(t, {});
      const res = await streamEvent(t, session.id, { role: 'user', content: 'hi' });
      expect(res.status).toBe(200);
      const frames = parseSse(await res.text());
      expect(frames.map((f) => f.event)).toEqual(['error', 'turn.completed']);
      expect(frames[0]!.data).toEqual({ error: expect.any(String) });

      const failed = await getSession(t, session.id);
      expect(failed.status).toBe('failed');
      expect(failed.error).toBe(frames[0]!.data.error);
      const turns = await t.request('GET', `/v1/agents/sessions/${session.id}/turns`);
      expect(turns.body.data[0]).toMatchObject({ status: 'failed', error: failed.error });

      up.set({ status: null, content: 'Back again.' });
      const retry = parseSse(await (await streamEvent(t, session.id, { role: 'user', content: 'hi again' })).text());
      expect(retry.map((f) => f.event)).toEqual(['delta', 'delta', 'turn.completed']);
      expect(await getSession(t, session.id)).toMatchObject({ status: 'idle', error: null });
    });

    test('a key owner with an empty wallet: the turn fails before any model call', async () => {
      const { t, up } = h;
      up.reset();
      const user = await makeUser(t);
      const key = await makeApiKey(t, user.id);
      const { session } = await newSession(t, {}, key.key);
      const frames = parseSse(await (await streamEvent(t, session.id, { role: 'user', content: 'hi' }, { token: key.key })).text());
      expect(frames.map((f) => f.event)).toEqual(['error', 'turn.completed']);
      expect(await getSession(t, session.id, key.key)).toMatchObject({ status: 'failed', error: frames[0]!.data.error });
      expect(up.stats.completions).toBe(0);
      expect(await t.services.billing.getBalanceMicros(user.id)).toBe(0n);
    });

    test('bad events are refused as JSON errors and change nothing', async () => {
      const { t } = h;
      const { session } = await newSession(t, {});
      const path = `/v1/agents/sessions/${session.id}/events`;
      for (const [body, status] of [
        [{ role: 'user' }, 400],
        [{ role: 'user', content: '' }, 400],
        [{ role: 'user', content: null }, 400],
        [{ role: 'robot', content: 'hi' }, 400],
        [{ content: 'hi' }, 400],
        [{ role: 'tool' }, 400],
        [{ role: 'tool', tool_call_results: [] }, 400],
        [{ role: 'tool', tool_call_results: [{ output: 'no id' }] }, 400],
        [{ role: 'tool', tool_call_results: [{ call_id: 'c1', output: 'x' }] }, 409],
      ] as const) {
        for (const p of [path, `${path}/stream`]) {
          const res = await t.request('POST', p, { body });
          expect(res.status).toBe(status);
          expect(res.headers.get('content-type')).toContain('application/json');
          expect(res.body).toEqual({ error: expect.any(String) });
        }
      }
      for (const p of ['/v1/agents/sessions/sess_nope/events', '/v1/agents/sessions/sess_nope/events/stream']) {
        expect((await t.request('POST', p, { body: { role: 'user', content: 'hi' } })).status).toBe(404);
      }
      expect(await eventCount(session.id)).toBe(0);
      expect(await getSession(t, session.id)).toMatchObject({ status: 'idle', error: null });
      expect((await t.request('GET', `/v1/agents/sessions/${session.id}/items`)).body.data).toEqual([]);
    });
  });
}

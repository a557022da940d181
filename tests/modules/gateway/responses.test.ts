/** POST /v1/responses through the official openai client, served by a chat-only upstream, billed like chat. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { startFakeUpstream } from '../../support/fake-upstream';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy';
import { fundedUser, type Harness, startHarness } from './gateway-harness';

const PER_TOKEN = 1000n;
let h: Harness;
/** Model `cut` reaches the same upstream through a TCP proxy the test can cut mid-stream. */
let proxy: TcpProxy;

beforeAll(async () => {
  const up = await startFakeUpstream({ models: ['m1', 'cut'] });
  proxy = await startTcpProxy(up.port);
  h = await startHarness({ upstream: up, backends: `m1=${up.url},cut=http://127.0.0.1:${proxy.port}/v1` });
  await h.t.services.pricing.setModelPrices([
    { slug: 'm1', unit: 'per_million_tokens', price: 1000 },
    { slug: 'cut', unit: 'per_million_tokens', price: 1000 },
  ]);
});
afterAll(async () => {
  await h.close();
  await proxy.close();
  await h.up.close();
});

const usageRows = (userId: string) => h.t.ctx.database.query<Record<string, any>>(sql`select * from router_usage where user_id = ${userId} order by created_at, id`);
const lastChat = () => h.up.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body!;
const weather = { type: 'function' as const, name: 'weather', description: 'the weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false };

describe('responses', () => {
  test('JSON: instructions and input become chat messages; output_text, usage with cost, X-Cost, exact debit', async () => {
    h.up.reset();
    const u = await fundedUser(h, 1_000_000n);
    const { data, response } = await u.client.responses.create({ model: 'm1', instructions: 'be brief', input: 'hi', max_output_tokens: 50, temperature: 0.2 }).withResponse();
    expect(data.object).toBe('response');
    expect(data.status).toBe('completed');
    expect(data.id).toMatch(/^resp_/);
    expect(data.output_text).toBe('Hello from the fake upstream.');
    expect(data.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello from the fake upstream.' }] });
    expect(data.usage).toMatchObject({ input_tokens: 10, output_tokens: 5, total_tokens: 15, cost: 0.015 });
    expect(response.headers.get('x-cost')).toBe('0.015000');
    expect(lastChat()).toEqual({ model: 'm1', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }], max_tokens: 50, temperature: 0.2 });
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - 15n * PER_TOKEN);
    const rows = await usageRows(u.user.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ entrypoint: 'm1', model: 'm1', prompt_tokens: 10, completion_tokens: 5, status: 200, streamed: false });
  });

  test('stream: the event sequence OpenAI sends, text deltas, response.completed with usage; the SDK stream helper assembles it', async () => {
    h.up.reset();
    h.up.set({ content: 'one two three' });
    const u = await fundedUser(h, 1_000_000n);
    const { data: stream, response } = await u.client.responses.create({ model: 'm1', input: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const events = [];
    for await (const e of stream) events.push(e);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    expect(deltas.join('')).toBe('one two three');
    const done = events.at(-1)! as { response: { usage: unknown; output: unknown[] } };
    expect(done.response.usage).toMatchObject({ input_tokens: 10, output_tokens: 3, total_tokens: 13, cost: 0.013 });
    expect(lastChat().stream_options).toEqual({ include_usage: true });

    const helper = u.client.responses.stream({ model: 'm1', input: 'again' });
    const text: string[] = [];
    helper.on('response.output_text.delta', (e) => text.push(e.delta));
    const final = await helper.finalResponse();
    expect(final.output_text).toBe('one two three');
    expect(text.join('')).toBe('one two three');
    await h.t.services.router.flushUsage();
    expect(await u.balance()).toBe(1_000_000n - 2n * 13n * PER_TOKEN);
    expect((await usageRows(u.user.id)).map((r) => [r.streamed, r.status, r.completion_tokens])).toEqual([
      [true, 200, 3],
      [true, 200, 3],
    ]);
    h.up.reset();
  });

  test('function tools: JSON function_call items, streamed argument deltas, and the tool result sent back as items', async () => {
    h.up.set({ toolCalls: [{ id: 'call_7', name: 'weather', arguments: '{"city":"Oslo"}' }] });
    const u = await fundedUser(h, 1_000_000n);
    const r = await u.client.responses.create({ model: 'm1', input: 'weather in Oslo?', tools: [weather], tool_choice: 'auto' });
    expect(r.output).toEqual([expect.objectContaining({ type: 'function_call', call_id: 'call_7', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' })]);
    expect(lastChat().tools).toEqual([{ type: 'function', function: { name: 'weather', description: 'the weather', parameters: weather.parameters, strict: false } }]);
    expect(lastChat().tool_choice).toBe('auto');

    const events = [];
    for await (const e of await u.client.responses.create({ model: 'm1', input: 'weather in Oslo?', tools: [weather], stream: true })) events.push(e);
    const types = events.map((e) => e.type);
    expect(types).toContain('response.function_call_arguments.delta');
    expect(types.slice(-3)).toEqual(['response.function_call_arguments.done', 'response.output_item.done', 'response.completed']);
    const args = events.flatMap((e) => (e.type === 'response.function_call_arguments.delta' ? [e.delta] : [])).join('');
    expect(args).toBe('{"city":"Oslo"}');
    const final = await u.client.responses.stream({ model: 'm1', input: 'weather in Oslo?', tools: [weather] }).finalResponse();
    expect(final.output[0]).toMatchObject({ type: 'function_call', name: 'weather', arguments: '{"city":"Oslo"}' });

    h.up.reset();
    const second = await u.client.responses.create({
      model: 'm1',
      tools: [weather],
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'weather in Oslo?' }] },
        { type: 'function_call', call_id: 'call_7', name: 'weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call_output', call_id: 'call_7', output: 'sunny' },
      ],
    });
    expect(second.output_text).toBe('Hello from the fake upstream.');
    expect(lastChat().messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'weather in Oslo?' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_7', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_7', content: 'sunny' },
    ]);
    await h.t.services.router.flushUsage();
    expect(await usageRows(u.user.id)).toHaveLength(4);
  });

  test('max_output_tokens reached (chat finish "length"): status incomplete, JSON and stream', async () => {
    const u = await fundedUser(h, 1_000_000n);
    h.up.set({ content: 'cut short', finishReason: 'length' });
    const r = await u.client.responses.create({ model: 'm1', input: 'x', max_output_tokens: 2 });
    expect(lastChat().max_tokens).toBe(2);
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    const events = [];
    for await (const e of await u.client.responses.create({ model: 'm1', input: 'x', max_output_tokens: 2, stream: true })) events.push(e);
    expect(events.at(-1)).toMatchObject({ type: 'response.incomplete', response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, usage: { output_tokens: 2 } } });
    h.up.reset();
  });

  test('an upstream stream that breaks mid-answer ends in response.failed; the delivered tokens are billed', async () => {
    h.up.set({ content: 'one two three four five six seven eight', chunkDelayMs: 20 });
    const u = await fundedUser(h, 1_000_000n);
    const events = [];
    for await (const e of await u.client.responses.create({ model: 'cut', input: 'x', stream: true })) {
      events.push(e);
      // The connection to the upstream drops after the second word has arrived.
      if (e.type === 'response.output_text.delta' && e.delta === 'two ') proxy.cut();
    }
    proxy.restore();
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    expect(deltas.join('')).toStartWith('one two ');
    expect(deltas.join('')).not.toBe('one two three four five six seven eight');
    const last = events.at(-1) as unknown as { type: string; response: { status: string; error: unknown; usage: { output_tokens: number; cost: number } } };
    expect(last.type).toBe('response.failed');
    expect(last.response.status).toBe('failed');
    expect(last.response.error).toMatchObject({ code: 'server_error' });
    await h.t.services.router.flushUsage();
    const [row] = await usageRows(u.user.id);
    expect(row).toMatchObject({ streamed: true, aborted: true, status: 502, completion_tokens: last.response.usage.output_tokens });
    expect(await u.balance()).toBe(1_000_000n - BigInt(row!.cost_micros));
    expect(BigInt(row!.cost_micros)).toBeGreaterThan(0n);
    h.up.reset();
  });

  test('JSON and stream: the usage row and its debit are committed before the answer ends (no flush needed)', async () => {
    const u = await fundedUser(h, 1_000_000n);
    await u.client.responses.create({ model: 'm1', input: 'hi' });
    expect(await usageRows(u.user.id)).toHaveLength(1);
    for await (const _ of await u.client.responses.create({ model: 'm1', input: 'hi', stream: true })) void _;
    expect(await usageRows(u.user.id)).toHaveLength(2);
    expect(await u.balance()).toBe(1_000_000n - 2n * 15n * PER_TOKEN);
  });

  test('bad input is 400 {error}, reaches no upstream and charges nothing', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const before = h.up.stats.completions;
    const cases: Array<[string, unknown]> = [
      ['no input', { model: 'm1' }],
      ['empty items', { model: 'm1', input: [] }],
      ['unknown item type', { model: 'm1', input: [{ type: 'web_search_call', id: 'ws_1' }] }],
      ['item_reference', { model: 'm1', input: [{ type: 'item_reference', id: 'msg_1' }] }],
      ['unknown content part', { model: 'm1', input: [{ role: 'user', content: [{ type: 'input_audio', data: 'x' }] }] }],
      ['bad role', { model: 'm1', input: [{ role: 'robot', content: 'x' }] }],
      ['hosted tool', { model: 'm1', input: 'x', tools: [{ type: 'web_search' }] }],
      ['previous_response_id not a string', { model: 'm1', input: 'x', previous_response_id: 7 }],
      ['store not a boolean', { model: 'm1', input: 'x', store: 'yes' }],
      ['conversation', { model: 'm1', input: 'x', conversation: 'conv_1' }],
      ['prompt template', { model: 'm1', input: 'x', prompt: { id: 'pmpt_1' } }],
      ['background', { model: 'm1', input: 'x', background: true }],
      ['bad reasoning effort', { model: 'm1', input: 'x', reasoning: { effort: 'max' } }],
      ['file input', { model: 'm1', input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }],
      ['only reasoning items', { model: 'm1', input: [{ type: 'reasoning', id: 'rs_1', summary: [] }] }],
      ['stream not a boolean', { model: 'm1', input: 'x', stream: 'yes' }],
      ['bad max_output_tokens', { model: 'm1', input: 'x', max_output_tokens: 0 }],
      ['no model', { input: 'x' }],
      ['item not an object', { model: 'm1', input: ['x'] }],
    ];
    for (const [what, body] of cases) {
      const res = await fetch(`${h.baseUrl}/v1/responses`, { method: 'POST', headers: { authorization: `Bearer ${u.key.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect([what, res.status]).toEqual([what, 400]);
      expect(typeof ((await res.json()) as { error: unknown }).error).toBe('string');
    }
    expect(h.up.stats.completions).toBe(before);
    await h.t.services.router.flushUsage();
    expect(await usageRows(u.user.id)).toHaveLength(0);
    expect(await u.balance()).toBe(1_000_000n);
  });
});

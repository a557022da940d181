/**
 * The Responses API as an agent client (Codex) uses it, through the official openai client against
 * a chat-only fake upstream: the exact event sequences (text, function calls, reasoning + text,
 * refusal), the request fields agents send, stored responses continued by previous_response_id,
 * GET and DELETE /v1/responses/{id}, owners, `store: false`, expiry and the sweep.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import type OpenAI from 'openai';
import { manualClock } from '../../support/clock';
import { startFakeUpstream } from '../../support/fake-upstream';
import { fundedUser, type Harness, startHarness } from './gateway-harness';

const PER_TOKEN = 1000n;
const DAY = 86_400_000;
const clock = manualClock();
let h: Harness;

beforeAll(async () => {
  const up = await startFakeUpstream({ models: ['m1'] });
  h = await startHarness({ upstream: up, clock });
  await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
});
afterAll(async () => {
  await h.close();
  await h.up.close();
});

const usageRows = (userId: string) => h.t.ctx.database.query<Record<string, any>>(sql`select * from router_usage where user_id = ${userId} order by created_at, id`);
const lastChat = () => h.up.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body!;
const shell = { type: 'function' as const, name: 'shell', description: 'run a command', parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } } }, strict: false };

async function events(client: OpenAI, body: Omit<OpenAI.Responses.ResponseCreateParamsStreaming, 'stream'>) {
  const all: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const e of await client.responses.create({ ...body, stream: true })) all.push(e);
  expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
  return all;
}

const raw = (key: string, method: string, path: string, body?: unknown) =>
  fetch(`${h.baseUrl}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });

describe('responses: stream events', () => {
  test('a function call: its item, argument deltas and done events, in order', async () => {
    h.up.reset();
    h.up.set({ toolCalls: [{ id: 'call_1', name: 'shell', arguments: '{"command":["ls"]}' }] });
    const u = await fundedUser(h, 1_000_000n);
    const all = await events(u.client, { model: 'm1', input: 'list files', tools: [shell] });
    expect(all.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const done = all.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(done.response.output).toEqual([expect.objectContaining({ type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"command":["ls"]}', status: 'completed' })]);
    expect(all[2]).toMatchObject({ output_index: 0, item: { type: 'function_call', status: 'in_progress', call_id: 'call_1', name: 'shell' } });
    expect(all[4]).toMatchObject({ output_index: 0, arguments: '{"command":["ls"]}', name: 'shell' });
    h.up.reset();
  });

  test('reasoning then text: a reasoning item with its summary events, then the message; reasoning tokens in usage', async () => {
    h.up.reset();
    h.up.set({ reasoning: 'think it over', content: 'one two' });
    const u = await fundedUser(h, 1_000_000n);
    const all = await events(u.client, { model: 'm1', input: 'hi', reasoning: { effort: 'high', summary: 'auto' } });
    expect(lastChat().reasoning_effort).toBe('high');
    expect(all.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.done',
      'response.reasoning_summary_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const indexes = all.flatMap((e) => ('output_index' in e ? [e.output_index] : []));
    expect(indexes).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]);
    expect(all[7]).toMatchObject({ type: 'response.reasoning_summary_text.done', text: 'think it over', summary_index: 0 });
    const done = all.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(done.response.output).toEqual([
      { id: expect.stringMatching(/^rs_/), type: 'reasoning', summary: [{ type: 'summary_text', text: 'think it over' }] },
      expect.objectContaining({ type: 'message', status: 'completed', content: [expect.objectContaining({ type: 'output_text', text: 'one two' })] }),
    ]);
    expect(done.response.usage).toMatchObject({ output_tokens: 5, output_tokens_details: { reasoning_tokens: 3 }, input_tokens_details: { cached_tokens: 0 } });
    expect(done.response.reasoning).toEqual({ effort: 'high', summary: 'auto' });

    // The SDK's own stream helper accepts the sequence; the `reasoning` field is read too; JSON alike.
    h.up.set({ reasoningField: 'reasoning' });
    const helper = u.client.responses.stream({ model: 'm1', input: 'hi' });
    const summary: string[] = [];
    helper.on('response.reasoning_summary_text.delta', (e) => summary.push(e.delta));
    const final = await helper.finalResponse();
    expect(summary.join('')).toBe('think it over');
    expect(final.output_text).toBe('one two');
    const json = await u.client.responses.create({ model: 'm1', input: 'hi' });
    expect(json.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
    expect(json.output[0]).toMatchObject({ summary: [{ type: 'summary_text', text: 'think it over' }] });
    h.up.reset();
  });

  test('a refusal streams as a refusal content part; cached tokens are reported', async () => {
    h.up.reset();
    h.up.set({ refusal: 'I cannot help', cachedTokens: 4 });
    const u = await fundedUser(h, 1_000_000n);
    const all = await events(u.client, { model: 'm1', input: 'x' });
    expect(all.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.refusal.delta',
      'response.refusal.delta',
      'response.refusal.delta',
      'response.refusal.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const done = all.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(done.response.output[0]).toMatchObject({ type: 'message', content: [{ type: 'refusal', refusal: 'I cannot help' }] });
    expect(done.response.usage).toMatchObject({ input_tokens: 10, input_tokens_details: { cached_tokens: 4 } });
    h.up.reset();
  });
});

describe('responses: request translation', () => {
  test("an agent's fields: tool_choice, parallel_tool_calls, reasoning, json_schema, images, assistant text, reasoning items dropped", async () => {
    h.up.reset();
    // Enough for the hold of an image prompt with 100 output tokens.
    const u = await fundedUser(h, 100_000_000n);
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
    await u.client.responses.create({
      model: 'm1',
      instructions: 'you are an agent',
      tools: [shell],
      tool_choice: { type: 'function', name: 'shell' },
      parallel_tool_calls: false,
      max_output_tokens: 100,
      reasoning: { effort: 'low' },
      text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } },
      store: false,
      include: ['reasoning.encrypted_content'],
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'be careful' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }, { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'low' }] },
        { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'hm' }], encrypted_content: 'opaque' },
        { type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'I see', annotations: [] }] },
        { type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{"command":["ls"]}' },
        { type: 'function_call', call_id: 'c2', name: 'shell', arguments: '{"command":["pwd"]}' },
        { type: 'function_call_output', call_id: 'c1', output: 'a.txt' },
        { type: 'function_call_output', call_id: 'c2', output: '/work' },
      ],
    });
    expect(lastChat()).toEqual({
      model: 'm1',
      messages: [
        { role: 'system', content: 'you are an agent' },
        { role: 'system', content: 'be careful' },
        { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } }] },
        { role: 'assistant', content: 'I see' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'shell', arguments: '{"command":["ls"]}' } },
            { id: 'c2', type: 'function', function: { name: 'shell', arguments: '{"command":["pwd"]}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'a.txt' },
        { role: 'tool', tool_call_id: 'c2', content: '/work' },
      ],
      tools: [{ type: 'function', function: { name: 'shell', description: 'run a command', parameters: shell.parameters, strict: false } }],
      tool_choice: { type: 'function', function: { name: 'shell' } },
      parallel_tool_calls: false,
      max_tokens: 100,
      reasoning_effort: 'low',
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
    });
  });

  test('hosted tools are refused with a 400 that names them', async () => {
    const u = await fundedUser(h, 1_000_000n);
    for (const type of ['web_search', 'file_search', 'code_interpreter', 'local_shell', 'mcp']) {
      const res = await raw(u.key.key, 'POST', '/v1/responses', { model: 'm1', input: 'x', tools: [shell, { type, name: 'x' }] });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toContain(`tools[1]: type "${type}" is a hosted tool`);
    }
  });
});

describe('responses: custom tools (free-form input, as Codex sends apply_patch)', () => {
  const patch = '*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch';
  const applyPatch = { type: 'custom' as const, name: 'apply_patch', description: 'Apply a patch', format: { type: 'grammar' as const, syntax: 'lark' as const, definition: 'start: patch' } };

  test('a function with one input string upstream; the call answered as a custom_tool_call item, streamed and JSON; its output sent back', async () => {
    h.up.reset();
    h.up.set({ toolCalls: [{ id: 'call_p', name: 'apply_patch', arguments: JSON.stringify({ input: patch }) }] });
    const u = await fundedUser(h, 1_000_000n);
    const all = await events(u.client, { model: 'm1', input: 'add a.txt', tools: [applyPatch], tool_choice: { type: 'custom', name: 'apply_patch' } });
    expect(lastChat().tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'apply_patch',
          description: 'Apply a patch\n\nThe input must follow this lark grammar:\nstart: patch',
          parameters: { type: 'object', properties: { input: { type: 'string', description: 'the raw input' } }, required: ['input'], additionalProperties: false },
        },
      },
    ]);
    expect(lastChat().tool_choice).toEqual({ type: 'function', function: { name: 'apply_patch' } });
    expect(all.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.custom_tool_call_input.delta',
      'response.custom_tool_call_input.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const item = { type: 'custom_tool_call', call_id: 'call_p', name: 'apply_patch', input: patch, status: 'completed' };
    expect((all.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response.output).toEqual([expect.objectContaining(item)]);
    const final = await u.client.responses.stream({ model: 'm1', input: 'add a.txt', tools: [applyPatch] }).finalResponse();
    expect(final.output).toEqual([expect.objectContaining(item)]);
    const json = await u.client.responses.create({ model: 'm1', input: 'add a.txt', tools: [applyPatch] });
    expect(json.output).toEqual([expect.objectContaining({ ...item, id: expect.stringMatching(/^ctc_/) })]);

    h.up.reset();
    await u.client.responses.create({
      model: 'm1',
      tools: [applyPatch],
      input: [
        { type: 'custom_tool_call', call_id: 'call_p', name: 'apply_patch', input: patch },
        { type: 'custom_tool_call_output', call_id: 'call_p', output: 'Done!' },
      ],
    });
    expect(lastChat().messages).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_p', type: 'function', function: { name: 'apply_patch', arguments: JSON.stringify({ input: patch }) } }] },
      { role: 'tool', tool_call_id: 'call_p', content: 'Done!' },
    ]);
  });
});

describe('responses: stored, continued, read back', () => {
  test('a Codex-style session: a function call, its output continued by previous_response_id, then text; the upstream gets the whole conversation', async () => {
    h.up.reset();
    const u = await fundedUser(h, 1_000_000n);
    h.up.set({ toolCalls: [{ id: 'call_ls', name: 'shell', arguments: '{"command":["ls"]}' }] });
    const first = (await events(u.client, { model: 'm1', instructions: 'agent rules', input: 'list the files', tools: [shell] })).at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(first.response).toMatchObject({ store: true, previous_response_id: null });

    h.up.set({ reasoning: 'files listed', content: 'There is a.txt', toolCalls: null });
    const second = (
      await events(u.client, {
        model: 'm1',
        instructions: 'agent rules',
        previous_response_id: first.response.id,
        input: [{ type: 'function_call_output', call_id: 'call_ls', output: 'a.txt' }],
        tools: [shell],
      })
    ).at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(second.response).toMatchObject({ previous_response_id: first.response.id, store: true });
    const conversation = [
      { role: 'system', content: 'agent rules' },
      { role: 'user', content: [{ type: 'text', text: 'list the files' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_ls', type: 'function', function: { name: 'shell', arguments: '{"command":["ls"]}' } }] },
      { role: 'tool', tool_call_id: 'call_ls', content: 'a.txt' },
    ];
    expect(lastChat().messages).toEqual(conversation);

    // The third turn (JSON) continues the second: its reasoning item is not sent back, its message is.
    h.up.reset();
    const third = await u.client.responses.create({ model: 'm1', previous_response_id: second.response.id, input: 'thanks' });
    expect(lastChat().messages).toEqual([...conversation.slice(1), { role: 'assistant', content: 'There is a.txt' }, { role: 'user', content: 'thanks' }]);
    expect(third.previous_response_id).toBe(second.response.id);

    // Read back: the very objects that were answered (GET by the SDK too, which adds its own fields).
    const stored = async (id: string) => (await raw(u.key.key, 'GET', `/v1/responses/${id}`)).json();
    expect(await stored(first.response.id)).toEqual(first.response);
    expect(await stored(third.id)).toEqual(JSON.parse(JSON.stringify({ ...third, _request_id: undefined, output_text: undefined })));
    expect((await u.client.responses.retrieve(second.response.id)).output_text).toBe('There is a.txt');

    // Billed like any request: three usage rows, the wallet down by their cost.
    const rows = await usageRows(u.user.id);
    expect(rows.map((r) => r.entrypoint)).toEqual(['m1', 'm1', 'm1']);
    const total = rows.reduce((sum, r) => sum + BigInt(r.cost_micros), 0n);
    expect(total).toBe(BigInt(11 + 15 + 15) * PER_TOKEN);
    expect(await u.balance()).toBe(1_000_000n - total);
  });

  test("another user's response is 404 everywhere; store: false is neither kept nor continued; DELETE forgets", async () => {
    const owner = await fundedUser(h, 1_000_000n);
    const stranger = await fundedUser(h, 1_000_000n);
    const kept = await owner.client.responses.create({ model: 'm1', input: 'hi' });
    for (const [method, path, body] of [
      ['GET', `/v1/responses/${kept.id}`, undefined],
      ['DELETE', `/v1/responses/${kept.id}`, undefined],
      ['POST', '/v1/responses', { model: 'm1', input: 'x', previous_response_id: kept.id }],
      ['GET', '/v1/responses/resp_unknown', undefined],
      ['POST', '/v1/responses', { model: 'm1', input: 'x', previous_response_id: 'resp_unknown' }],
    ] as const) {
      const res = await raw(stranger.key.key, method, path, body);
      expect([method, path, res.status]).toEqual([method, path, 404]);
      expect(typeof ((await res.json()) as { error: unknown }).error).toBe('string');
    }

    const unkept = await owner.client.responses.create({ model: 'm1', input: 'hi', store: false });
    expect((unkept as unknown as { store: boolean }).store).toBe(false);
    expect((await raw(owner.key.key, 'GET', `/v1/responses/${unkept.id}`)).status).toBe(404);
    expect((await raw(owner.key.key, 'POST', '/v1/responses', { model: 'm1', input: 'x', previous_response_id: unkept.id })).status).toBe(404);

    const next = await owner.client.responses.create({ model: 'm1', input: 'more', previous_response_id: kept.id });
    expect(await owner.client.responses.delete(kept.id)).toEqual({ id: kept.id, object: 'response', deleted: true } as never);
    expect((await raw(owner.key.key, 'GET', `/v1/responses/${kept.id}`)).status).toBe(404);
    // A conversation whose earlier response is gone cannot be continued faithfully.
    const broken = await raw(owner.key.key, 'POST', '/v1/responses', { model: 'm1', input: 'x', previous_response_id: next.id });
    expect(broken.status).toBe(404);
    expect(((await broken.json()) as { error: string }).error).toContain(kept.id);
    // None of the refused requests reached an upstream or cost anything.
    expect((await usageRows(stranger.user.id)).length).toBe(0);
    expect(await stranger.balance()).toBe(1_000_000n);
  });

  test('stored responses are kept 30 days, then read as 404 and swept', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const r = await u.client.responses.create({ model: 'm1', input: 'hi' });
    clock.advance(29 * DAY);
    expect((await u.client.responses.retrieve(r.id)).id).toBe(r.id);
    expect(await h.t.services.gateway.sweepResponses()).toBe(0);
    clock.advance(2 * DAY);
    expect((await raw(u.key.key, 'GET', `/v1/responses/${r.id}`)).status).toBe(404);
    expect((await raw(u.key.key, 'POST', '/v1/responses', { model: 'm1', input: 'x', previous_response_id: r.id })).status).toBe(404);
    expect(await h.t.services.gateway.sweepResponses()).toBeGreaterThanOrEqual(1);
    const [left] = await h.t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from stored_responses where id = ${r.id}`);
    expect(left!.n).toBe(0);
  });
});

describe('responses: admission of a continued conversation', () => {
  test('the hold counts the stored conversation: a wallet short of it gets a smaller completion allowance', async () => {
    h.up.reset();
    // 1000 tokens' worth: the allowance the router grants shows the prompt bound it took.
    const u = await fundedUser(h, 1000n * PER_TOKEN);
    const long = 'word '.repeat(100);
    const first = await u.client.responses.create({ model: 'm1', input: long });
    const alone = lastChat().max_tokens as number;
    await u.client.responses.create({ model: 'm1', input: 'x', previous_response_id: first.id });
    const continued = lastChat().max_tokens as number;
    expect(lastChat().messages[0]).toEqual({ role: 'user', content: [{ type: 'text', text: long }] });
    // The continued request's bound holds the first prompt's 500 bytes (not just its own few).
    expect(continued).toBeLessThanOrEqual(alone);
  });
});

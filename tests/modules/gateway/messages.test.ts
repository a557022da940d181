/**
 * POST /v1/messages and /v1/messages/count_tokens through the official `@anthropic-ai/sdk`:
 * translated to chat completions for an OpenAI-compatible backend (fake-upstream), and passed
 * through to an anthropic-format backend (fake-anthropic); billed, limited and refused like chat,
 * errors in Anthropic's shape. Claude model names reach the backends through routes.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { signatureOf, startFakeAnthropic, type FakeAnthropic } from '../../support/fake-anthropic';
import { startFakeUpstream } from '../../support/fake-upstream';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy';
import { fundedUser, type Harness, startHarness, waitFor } from './gateway-harness';
import { countTexts } from '../../../src/modules/metering';

/** m1 (chat backend): 1000 micro-units a token. */
const PER_TOKEN = 1000n;
/** claude-up (anthropic backend), per token: input 1000, output 5000, cached input 100 micro-units. */
const PRICE = { input: 1000n, output: 5000n, cached: 100n };
const SONNET = 'claude-sonnet-5-5';
const OPUS = 'claude-opus-5-5';
const CUT = 'claude-cut';
/** A per-request priced model (0.1 a request) behind the chat backend. */
const HAIKU = 'claude-haiku-4-5';
const ANTHROPIC_KEY = 'sk-ant-fake-key';

let h: Harness;
let fa: FakeAnthropic;
let proxy: TcpProxy;

beforeAll(async () => {
  const up = await startFakeUpstream({ models: ['m1', 'cut'] });
  proxy = await startTcpProxy(up.port);
  fa = await startFakeAnthropic({ apiKey: ANTHROPIC_KEY, models: ['claude-up'] });
  h = await startHarness({
    upstream: up,
    backends: `m1=${up.url},pr=${up.url},cut=http://127.0.0.1:${proxy.port}/v1,claude-up=anthropic+${fa.url}#env:FAKE_ANTHROPIC_KEY`,
    env: { FAKE_ANTHROPIC_KEY: ANTHROPIC_KEY, ROUTES: `${SONNET}=fallback:m1;${OPUS}=fallback:claude-up;${CUT}=fallback:cut;${HAIKU}=fallback:pr` },
  });
  await h.t.services.pricing.setModelPrices([
    { slug: 'm1', unit: 'per_million_tokens', price: 1000 },
    { slug: 'cut', unit: 'per_million_tokens', price: 1000 },
    { slug: 'pr', unit: 'per_request', price: 0.1 },
    { slug: 'claude-up', unit: 'per_million_tokens', price: 1000, input_price: 1000, output_price: 5000, cached_input_price: 100 },
  ]);
});
afterAll(async () => {
  await h.close();
  await proxy.close();
  await h.up.close();
  await fa.close();
});

const usageRows = (userId: string) => h.t.ctx.database.query<Record<string, any>>(sql`select * from router_usage where user_id = ${userId} order by created_at, id`);
const lastChat = () => h.up.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!;
const lastMessages = () => fa.requests.filter((r) => r.path === '/v1/messages').at(-1)!;
/** An SDK client of the gateway: the key as x-api-key (the SDK's apiKey). */
const anthropicFor = (key: string, extra: Partial<ConstructorParameters<typeof Anthropic>[0]> = {}) => new Anthropic({ baseURL: h.baseUrl, apiKey: key, maxRetries: 0, ...extra });
const weather = { name: 'weather', description: 'the weather in a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } };
const post = (path: string, body: unknown, headers: Record<string, string>) => fetch(`${h.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

describe('messages translated to chat completions', () => {
  test('JSON with x-api-key: system, stop_sequences, text; usage with cost, X-Cost, exact debit; the usage row names the Claude model asked', async () => {
    h.up.reset();
    const u = await fundedUser(h, 1_000_000n);
    const client = anthropicFor(u.key.key);
    // temperature is not in this SDK's types (newer models refuse it); the API still takes it.
    const params = { model: SONNET, max_tokens: 100, system: 'be brief', stop_sequences: ['END'], temperature: 0.5, messages: [{ role: 'user' as const, content: 'hi' }] };
    const { data, response } = await client.messages
      .create(params, { headers: { 'anthropic-beta': 'some-beta-2025-01-01' } })
      .withResponse();
    expect(data).toMatchObject({ type: 'message', role: 'assistant', model: 'm1', content: [{ type: 'text', text: 'Hello from the fake upstream.' }], stop_reason: 'end_turn', stop_sequence: null });
    expect(data.id).toMatch(/^msg_/);
    expect(data.usage).toMatchObject({ input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 0, cache_creation_input_tokens: 0, cost: 0.015 });
    expect(response.headers.get('x-cost')).toBe('0.015000');
    const sent = lastChat();
    expect(sent.body).toEqual({ model: 'm1', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }], max_tokens: 100, stop: ['END'], temperature: 0.5 });
    // Anthropic's headers mean nothing to a chat backend (and a strict one refuses unknown headers' flags): not sent.
    expect(sent.headers['anthropic-beta']).toBeUndefined();
    expect(sent.headers['x-api-key']).toBeUndefined();
    expect(await u.balance()).toBe(1_000_000n - 15n * PER_TOKEN);
    const rows = await usageRows(u.user.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ entrypoint: SONNET, model: 'm1', prompt_tokens: 10, completion_tokens: 5, status: 200, streamed: false });
  });

  test("stream: Anthropic's event order, the SDK assembles the message; message_delta carries the usage and cost", async () => {
    h.up.reset();
    h.up.set({ content: 'one two three' });
    const u = await fundedUser(h, 1_000_000n);
    const client = anthropicFor(u.key.key);
    const { data: stream, response } = await client.messages.create({ model: SONNET, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect(response.headers.get('x-cost-final')).toBe('false');
    const events = [];
    for await (const e of stream) events.push(e);
    expect(events.map((e) => e.type)).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
    expect(events[1]).toMatchObject({ index: 0, content_block: { type: 'text', text: '' } });
    expect(events[6]).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 10, output_tokens: 3, cost: 0.013 } });
    expect(lastChat().body!.stream_options).toEqual({ include_usage: true });

    const helper = client.messages.stream({ model: SONNET, max_tokens: 100, messages: [{ role: 'user', content: 'again' }] });
    const final = await helper.finalMessage();
    expect(final.content as unknown[]).toEqual([{ type: 'text', text: 'one two three' }]);
    expect(final.usage).toMatchObject({ input_tokens: 10, output_tokens: 3 });
    expect(await u.balance()).toBe(1_000_000n - 26n * PER_TOKEN);
    const rows = await usageRows(u.user.id);
    expect(rows.map((r) => [r.entrypoint, r.streamed, r.status])).toEqual([
      [SONNET, true, 200],
      [SONNET, true, 200],
    ]);
  });

  test('reasoning becomes a thinking block first, and no empty text block stands before it (JSON and stream)', async () => {
    h.up.reset();
    h.up.set({ reasoning: 'think think', content: 'answer' });
    const u = await fundedUser(h, 1_000_000n);
    const client = anthropicFor(u.key.key);
    const body = { model: SONNET, max_tokens: 100, thinking: { type: 'enabled' as const, budget_tokens: 50 }, messages: [{ role: 'user' as const, content: 'hi' }] };
    const json = await client.messages.create(body);
    expect(json.content as unknown[]).toEqual([
      { type: 'thinking', thinking: 'think think', signature: '' },
      { type: 'text', text: 'answer' },
    ]);
    // The chat backend never hears of Anthropic's thinking setting.
    expect(lastChat().body!.thinking).toBeUndefined();
    const events = [];
    for await (const e of await client.messages.create({ ...body, stream: true })) events.push(e);
    const starts = events.filter((e) => e.type === 'content_block_start').map((e) => (e as { content_block: { type: string } }).content_block.type);
    expect(starts).toEqual(['thinking', 'text']);
    const thinking = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'thinking_delta' ? [e.delta.thinking] : []));
    expect(thinking.join('')).toBe('think think');
  });

  test('tools: tool calls become tool_use blocks; the next turn sends back thinking, tool_use and tool_result, and the chat backend gets calls and a tool message', async () => {
    h.up.reset();
    h.up.set((b) => (b.messages.some((m: { role: string }) => m.role === 'tool') ? { content: 'It is sunny.' } : { reasoning: 'I need the weather', toolCalls: [{ id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' }] }));
    const u = await fundedUser(h, 1_000_000n);
    const client = anthropicFor(u.key.key);
    const asked = { model: SONNET, max_tokens: 200, tools: [weather], tool_choice: { type: 'auto' as const }, messages: [{ role: 'user' as const, content: 'weather in Paris?' }] };
    const turn1 = await client.messages.stream(asked).finalMessage();
    expect(turn1.stop_reason).toBe('tool_use');
    expect(turn1.content.map((b) => b.type)).toEqual(['thinking', 'tool_use']);
    expect(turn1.content[1]).toMatchObject({ type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } });
    expect(lastChat().body!.tools).toEqual([{ type: 'function', function: { name: 'weather', description: 'the weather in a city', parameters: weather.input_schema } }]);
    expect(lastChat().body!.tool_choice).toBe('auto');

    const turn2 = await client.messages.create({
      ...asked,
      messages: [...asked.messages, { role: 'assistant', content: turn1.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: '22°C, sunny' }] }],
    });
    expect(turn2.content as unknown[]).toEqual([{ type: 'text', text: 'It is sunny.' }]);
    expect(lastChat().body!.messages).toEqual([
      { role: 'user', content: 'weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '22°C, sunny' },
    ]);
  });

  test('images: a base64 image block reaches the chat backend as an image_url data URL', async () => {
    h.up.reset();
    const u = await fundedUser(h, 1_000_000n);
    const data = Buffer.from('fake png bytes').toString('base64');
    await anthropicFor(u.key.key).messages.create({
      model: SONNET,
      max_tokens: 20,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data } }, { type: 'text', text: 'what is it?' }] }],
    });
    expect(lastChat().body!.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } },
          { type: 'text', text: 'what is it?' },
        ],
      },
    ]);
  });

  test('a stream the backend breaks ends with an error event; the delivered tokens are billed', async () => {
    h.up.reset();
    h.up.set({ content: 'one two three four five six seven eight', chunkDelayMs: 20 });
    const u = await fundedUser(h, 1_000_000n);
    const events = [];
    const res = await post('/v1/messages', { model: CUT, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': u.key.key, 'anthropic-version': '2023-06-01' });
    expect(res.status).toBe(200);
    const decoder = new TextDecoder();
    let text = '';
    for await (const bytes of res.body!) {
      text += decoder.decode(bytes, { stream: true });
      if (text.includes('"text":"two "') && !events.length) {
        events.push('cut');
        proxy.cut();
      }
    }
    proxy.restore();
    const names = [...text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
    expect(names.at(-1)).toBe('error');
    expect(names).not.toContain('message_stop');
    expect(text).toContain('"type":"error","error":{"type":"api_error"');
    const rows = await usageRows(u.user.id);
    expect(rows[0]).toMatchObject({ streamed: true, aborted: true, status: 502 });
    expect(BigInt(rows[0]!.cost_micros)).toBeGreaterThan(0n);
    expect(await u.balance()).toBe(1_000_000n - BigInt(rows[0]!.cost_micros));
    h.up.reset();
  });

  test('count_tokens: a count without a charge', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const client = anthropicFor(u.key.key);
    const small = await client.messages.countTokens({ model: SONNET, messages: [{ role: 'user', content: 'hi' }] });
    const large = await client.messages.countTokens({ model: SONNET, system: 'a longer system prompt here', tools: [weather], messages: [{ role: 'user', content: 'hi there, how is it going today?' }] });
    expect(small.input_tokens).toBeGreaterThan(0);
    expect(large.input_tokens).toBeGreaterThan(small.input_tokens);
    expect(await u.balance()).toBe(1_000_000n);
    const missing = await post('/v1/messages/count_tokens', { model: 'nope', messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': u.key.key });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ type: 'error', error: { type: 'not_found_error', message: 'model "nope" does not exist or is not available' } });
  });
});

describe('messages passed through to an anthropic-format backend', () => {
  test('JSON: the body goes upstream as sent (model replaced) with the backend key, version and beta; cache tokens billed once each', async () => {
    fa.reset();
    fa.set({ text: 'Bonjour.', usage: { input_tokens: 20, cache_creation_input_tokens: 100, cache_read_input_tokens: 1000 } });
    const u = await fundedUser(h, 100_000_000n);
    const client = anthropicFor(u.key.key, { defaultHeaders: { 'anthropic-beta': 'prompt-caching-2024-07-31' } });
    const asked = {
      model: OPUS,
      max_tokens: 300,
      system: [{ type: 'text' as const, text: 'long cached system', cache_control: { type: 'ephemeral' as const } }],
      // What chat cannot express is the anthropic backend's to judge: a server tool, a document.
      tools: [weather, { type: 'web_search_20250305' as const, name: 'web_search' as const, max_uses: 1 }],
      messages: [
        {
          role: 'user' as const,
          content: [
            { type: 'document' as const, source: { type: 'text' as const, media_type: 'text/plain' as const, data: 'a document' } },
            { type: 'text' as const, text: 'salut' },
          ],
        },
      ],
      metadata: { user_id: 'u-1' },
    };
    const { data, response } = await client.messages.create(asked).withResponse();
    expect(data).toMatchObject({ type: 'message', content: [{ type: 'text', text: 'Bonjour.' }], usage: { input_tokens: 20, cache_creation_input_tokens: 100, cache_read_input_tokens: 1000, output_tokens: 1 } });
    const up = lastMessages();
    expect(up.body).toEqual({ ...asked, model: 'claude-up', stream: false });
    expect(up.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(up.headers.authorization).toBeUndefined();
    // The client's API version and beta flags are forwarded as sent.
    expect(up.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(up.headers['anthropic-beta']).toBe('prompt-caching-2024-07-31');
    // (input + cache writes) at the input price, cache reads at the cached price, output at the output price.
    const cost = (20n + 100n) * PRICE.input + 1000n * PRICE.cached + 1n * PRICE.output;
    expect(response.headers.get('x-cost')).toBe((Number(cost) / 1e6).toFixed(6));
    expect(await u.balance()).toBe(100_000_000n - cost);
    const [row] = await usageRows(u.user.id);
    expect(row).toMatchObject({ entrypoint: OPUS, model: 'claude-up', prompt_tokens: 1120, cached_tokens: 1000, completion_tokens: 1, status: 200, cost_micros: String(cost) });
  });

  test('a Claude Code turn pair: thinking + tool_use streamed, then the thinking block sent back byte-intact with its signature and the tool_result; cumulative message_delta usage billed once', async () => {
    fa.reset();
    fa.set((b) =>
      b.messages.length > 1
        ? { thinking: 'now I can answer', text: 'It is sunny in Paris.', usage: { input_tokens: 50, cache_creation_input_tokens: 0, cache_read_input_tokens: 200 } }
        : { thinking: 'I should call the weather tool', text: '', toolUse: { id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }, usage: { input_tokens: 30, cache_creation_input_tokens: 200, cache_read_input_tokens: 0 } },
    );
    const u = await fundedUser(h, 100_000_000n);
    const client = anthropicFor(u.key.key);
    const asked = { model: OPUS, max_tokens: 2000, thinking: { type: 'enabled' as const, budget_tokens: 1024 }, tools: [weather], messages: [{ role: 'user' as const, content: 'weather in Paris?' }] };
    const events = [];
    for await (const e of await client.messages.create({ ...asked, stream: true })) events.push(e);
    expect(events.map((e) => e.type)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const delta = events.at(-2) as unknown as { usage: Record<string, number> };
    const firstCost = (30n + 200n) * PRICE.input + 7n * PRICE.output;
    expect(delta.usage).toMatchObject({ input_tokens: 30, cache_creation_input_tokens: 200, output_tokens: 7, cost: Number(firstCost) / 1e6 });

    const turn1 = await client.messages.stream({ ...asked }).finalMessage();
    expect(turn1.content.map((b) => b.type)).toEqual(['thinking', 'tool_use']);
    expect(turn1.content[0]).toEqual({ type: 'thinking', thinking: 'I should call the weather tool', signature: signatureOf('I should call the weather tool') });
    const turn2 = await client.messages.create({
      ...asked,
      messages: [...asked.messages, { role: 'assistant', content: turn1.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '22°C' }] }],
    });
    expect(turn2.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    expect(turn2.content[1]).toMatchObject({ text: 'It is sunny in Paris.' });
    // The fake refuses a thinking block whose signature changed: the 200 above says it arrived intact.
    expect(lastMessages().body!.messages[1].content[0].signature).toBe(signatureOf('I should call the weather tool'));

    const secondCost = 50n * PRICE.input + 200n * PRICE.cached + 9n * PRICE.output;
    expect(await u.balance()).toBe(100_000_000n - 2n * firstCost - secondCost);
    const rows = await usageRows(u.user.id);
    expect(rows.map((r) => [r.prompt_tokens, r.cached_tokens, r.completion_tokens, r.streamed])).toEqual([
      [230, 0, 7, true],
      [230, 0, 7, true],
      [250, 200, 9, false],
    ]);
  });

  test('a wallet that affords less than max_tokens: served with an allowance, the thinking budget lowered below it', async () => {
    fa.reset();
    const u = await fundedUser(h, 8_000_000n);
    const answer = await anthropicFor(u.key.key).messages.create({ model: OPUS, max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 2048 }, messages: [{ role: 'user', content: 'hi' }] });
    expect(answer.type).toBe('message');
    const sent = lastMessages().body!;
    expect(sent.max_tokens).toBeLessThan(4096);
    expect(sent.max_tokens).toBeGreaterThan(1024);
    expect(sent.thinking).toEqual({ type: 'enabled', budget_tokens: sent.max_tokens - 1 });
  });

  test('a thinking block whose signature a client changed is refused by the backend: 400 in Anthropic shape, nothing billed', async () => {
    fa.reset();
    const u = await fundedUser(h, 100_000_000n);
    const client = anthropicFor(u.key.key);
    const err = await client.messages
      .create({
        model: OPUS,
        max_tokens: 2000,
        thinking: { type: 'enabled', budget_tokens: 1024 },
        tools: [weather],
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: [{ type: 'thinking', thinking: 'x', signature: 'forged' }, { type: 'tool_use', id: 't', name: 'weather', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'r' }] },
        ],
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(err.error.error.message).toContain('Invalid `signature`');
    expect(await u.balance()).toBe(100_000_000n);
  });

  test('an error event after the 200: passed on as the stream ends; what was delivered is billed', async () => {
    fa.reset();
    fa.set({ text: 'one two three four five', errorAfterEvents: 5 });
    const u = await fundedUser(h, 100_000_000n);
    const res = await post('/v1/messages', { model: OPUS, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'x' }] }, { authorization: `Bearer ${u.key.key}` });
    expect(res.status).toBe(200);
    const text = await res.text();
    const names = [...text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
    expect(names).toEqual(['message_start', 'ping', 'content_block_start', 'content_block_delta', 'content_block_delta', 'error']);
    expect(text).toContain('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}');
    const [row] = await usageRows(u.user.id);
    // The prompt as message_start reported it, the text delivered (counted).
    const delivered = await countTexts(['one two ']);
    expect(row).toMatchObject({ status: 502, streamed: true, aborted: true, prompt_tokens: 12, completion_tokens: delivered, tokens_counted: true });
    expect(BigInt(row!.cost_micros)).toBe(12n * PRICE.input + BigInt(delivered) * PRICE.output);
    expect(await u.balance()).toBe(100_000_000n - BigInt(row!.cost_micros));
  });

  test('a beta flag the backend refuses comes back as its 400, in Anthropic shape', async () => {
    fa.reset();
    const u = await fundedUser(h, 100_000_000n);
    const res = await post('/v1/messages', { model: OPUS, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': u.key.key, 'anthropic-beta': 'no-such-beta' });
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expect(body.type).toBe('error');
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toContain('no-such-beta');
    // A client that names no API version: the backend still gets one.
    expect(lastMessages().headers['anthropic-version']).toBe('2023-06-01');
    await post('/v1/messages', { model: OPUS, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': u.key.key, 'anthropic-version': '2099-01-01' });
    expect(lastMessages().headers['anthropic-version']).toBe('2099-01-01');
  });
});

describe('admin backends of format anthropic', () => {
  test('PUT /api/admin/router/backends takes format; the listing shows it; Messages requests pass through, chat requests never reach it; the backend is probed on its own API', async () => {
    const admin = await fundedUser(h, 0n, { admin: true });
    const put = (backends: unknown) =>
      fetch(`${h.baseUrl}/api/admin/router/backends`, { method: 'PUT', headers: { authorization: `Bearer ${admin.user.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ backends }) });
    expect((await put([{ model: 'claude-up', url: fa.url, format: 'claude' }])).status).toBe(400);
    const res = await put([{ model: 'claude-admin', url: fa.url, api_key: ANTHROPIC_KEY, format: 'anthropic' }, { model: 'm1', url: h.up.url }]);
    expect(res.status).toBe(200);
    const { backends } = (await res.json()) as { backends: Array<{ model: string; source: string; format: string }> };
    expect(backends.filter((b) => b.source === 'admin').map((b) => [b.model, b.format]).sort()).toEqual([
      ['claude-admin', 'anthropic'],
      ['m1', 'openai'],
    ]);
    expect(backends.filter((b) => b.source === 'env').map((b) => [b.model, b.format])).toContainEqual(['claude-up', 'anthropic']);
    await h.t.services.pricing.setModelPrices([
      { slug: 'm1', unit: 'per_million_tokens', price: 1000 },
      { slug: 'cut', unit: 'per_million_tokens', price: 1000 },
      { slug: 'pr', unit: 'per_request', price: 0.1 },
      { slug: 'claude-up', unit: 'per_million_tokens', price: 1000, input_price: 1000, output_price: 5000, cached_input_price: 100 },
      { slug: 'claude-admin', unit: 'per_million_tokens', price: 1000 },
    ]);
    fa.reset();
    const u = await fundedUser(h, 10_000_000n);
    const answer = await anthropicFor(u.key.key).messages.create({ model: 'claude-admin', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    expect(answer.content as unknown[]).toEqual([{ type: 'text', text: 'Hello from the fake Anthropic.' }]);
    expect(lastMessages().headers['x-api-key']).toBe(ANTHROPIC_KEY);
    // Chat completions are not a Messages API backend's protocol: no backend serves the model for chat.
    const chat = await post('/v1/chat/completions', { model: 'claude-admin', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${u.key.key}` });
    expect(chat.status).toBe(503);
    expect(fa.requests.some((r) => r.path.includes('chat'))).toBe(false);
    fa.reset();
    await h.t.services.router.probeBackends();
    expect(fa.requests.filter((r) => r.path === '/v1/models').map((r) => [r.headers['x-api-key'], r.headers['anthropic-version']])).toContainEqual([ANTHROPIC_KEY, '2023-06-01']);
    expect(h.t.services.router.listBackends().filter((b) => b.format === 'anthropic').every((b) => b.healthy)).toBe(true);
    expect((await put([])).status).toBe(200);
  });
});

describe('captured Messages requests', () => {
  test('a capturing key keeps /v1/messages requests and answers (translated JSON, passed-through stream); a replay answers in the Messages shape', async () => {
    h.up.reset();
    fa.reset();
    fa.set({ text: 'captured words here' });
    const u = await fundedUser(h, 100_000_000n);
    const made = await h.t.request<{ key: string; id: string }>('POST', '/api/api-keys', { token: u.user.token, body: { name: 'captured', capture: true } });
    const client = anthropicFor(made.body.key);
    await client.messages.create({ model: SONNET, max_tokens: 20, messages: [{ role: 'user', content: 'keep me' }] });
    for await (const _ of await client.messages.create({ model: OPUS, max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'stream me' }] })) void _;
    await h.t.services.router.flushUsage();
    await h.t.services.captures.flush();
    const rows = await h.t.ctx.database.query<Record<string, any>>(sql`select * from captures where user_id = ${u.user.id} order by created_at, id`);
    expect(rows.map((r) => [r.endpoint, r.streamed, r.entrypoint, r.model])).toEqual([
      ['messages', false, SONNET, 'm1'],
      ['messages', true, OPUS, 'claude-up'],
    ]);
    const detail = (id: string) => h.t.request<Record<string, any>>('GET', `/api/captures/${id}`, { token: u.user.token });
    const json = (await detail(rows[0]!.id)).body;
    expect(json.request).toEqual({ model: SONNET, max_tokens: 20, messages: [{ role: 'user', content: 'keep me' }] });
    expect(json.response).toMatchObject({ type: 'message', content: [{ type: 'text', text: 'Hello from the fake upstream.' }] });
    const streamed = (await detail(rows[1]!.id)).body;
    expect(streamed.response).toMatchObject({ text: 'captured words here', finish_reason: 'end_turn', usage: { output_tokens: 3 } });

    const replayed = await fetch(`${h.baseUrl}/v1/router/replay`, { method: 'POST', headers: { authorization: `Bearer ${made.body.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ capture_id: rows[1]!.id }) });
    expect(replayed.status).toBe(200);
    expect(replayed.headers.get('x-replay-of')).toBe(rows[1]!.id);
    const text = await replayed.text();
    expect([...text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]).at(-1)).toBe('message_stop');
    // A replay names no API version: the anthropic backend gets the default.
    expect(lastMessages().headers['anthropic-version']).toBe('2023-06-01');
  });
});

describe('messages: credentials, limits and errors in Anthropic shape', () => {
  test('401 without a key or with a bad one; the key as Bearer works too', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const body = { model: SONNET, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
    for (const headers of <Record<string, string>[]>[{}, { 'x-api-key': 'bfvk-not-a-key' }, { 'x-api-key': 'nonsense' }, { authorization: 'Bearer bfvk-wrong' }]) {
      const res = await post('/v1/messages', body, headers);
      expect(res.status).toBe(401);
      expect(res.headers.get('x-cost')).toBe('0.000000');
      expect(await res.json()).toEqual({ type: 'error', error: { type: 'authentication_error', message: 'missing or invalid credentials' } });
    }
    const err = await anthropicFor('bfvk-wrong').messages.create({ model: SONNET, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    const bearer = new Anthropic({ baseURL: h.baseUrl, authToken: u.key.key, apiKey: null, maxRetries: 0 });
    expect((await bearer.messages.create({ model: SONNET, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })).type).toBe('message');
    // The beta Messages API (what Claude Code calls) is the same route with ?beta=true.
    expect((await post('/v1/messages?beta=true', body, { 'x-api-key': u.key.key, 'anthropic-beta': 'interleaved-thinking-2025-05-14' })).status).toBe(200);
    expect((await post('/v1/messages/count_tokens?beta=true', body, { 'x-api-key': u.key.key })).status).toBe(200);
    // Both headers (ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY both set): the one holding a key counts.
    expect((await post('/v1/messages', body, { authorization: 'Bearer something-else', 'x-api-key': u.key.key })).status).toBe(200);
    // The Anthropic SDK lists the models too (x-api-key).
    const listed = [];
    for await (const m of anthropicFor(u.key.key).models.list()) listed.push(m.id);
    expect(listed).toContain(SONNET);
    expect(listed).toContain('claude-up');
    // x-api-key is Anthropic's header: the OpenAI-compatible routes keep to Bearer.
    expect((await post('/v1/chat/completions', { model: 'm1', messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': u.key.key })).status).toBe(401);
  });

  test('400 for a bad body, 404 for an unknown model, 402 without money, 403 outside the key models, 429 past the key rpm; never 500, always Anthropic shape', async () => {
    const u = await fundedUser(h, 1_000_000n);
    const key = { 'x-api-key': u.key.key };
    const shape = async (res: Response, status: number, type: string) => {
      expect(res.status).toBe(status);
      const body = (await res.json()) as any;
      expect(body.type).toBe('error');
      expect(body.error.type).toBe(type);
      expect(typeof body.error.message).toBe('string');
    };
    await shape(await post('/v1/messages', { model: SONNET, messages: [{ role: 'user', content: 'hi' }] }, key), 400, 'invalid_request_error');
    await shape(await post('/v1/messages', { model: SONNET, max_tokens: 5, messages: [] }, key), 400, 'invalid_request_error');
    await shape(await post('/v1/messages', { model: SONNET, max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'mystery' }] }] }, key), 400, 'invalid_request_error');
    await shape(await fetch(`${h.baseUrl}/v1/messages`, { method: 'POST', headers: { ...key, 'content-type': 'application/json' }, body: '{not json' }), 400, 'invalid_request_error');
    await shape(await fetch(`${h.baseUrl}/v1/messages`, { method: 'POST', headers: { ...key, 'content-type': 'text/plain' }, body: 'hi' }), 415, 'invalid_request_error');
    await shape(await post('/v1/messages', { model: 'claude-unknown', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }, key), 404, 'not_found_error');
    await shape(await post('/v1/messages/nothing-here', {}, key), 404, 'not_found_error');

    const poor = await fundedUser(h, 0n);
    const err = await anthropicFor(poor.key.key).messages.create({ model: SONNET, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
    expect(err.status).toBe(402);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'billing_error' } });

    const api = (method: string, path: string, body?: unknown) => h.t.request(method, path, { token: u.user.token, body });
    const limited = await api('POST', '/api/api-keys', { name: 'opus only', models: [OPUS], rpm: 1 });
    expect(limited.status).toBe(201);
    const lk = { 'x-api-key': limited.body.key as string };
    await shape(await post('/v1/messages', { model: SONNET, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }, lk), 403, 'permission_error');
    fa.reset();
    expect((await post('/v1/messages', { model: OPUS, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }, lk)).status).toBe(200);
    await shape(await post('/v1/messages', { model: OPUS, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }, lk), 429, 'rate_limit_error');
  });

  test('a key spend limit holds /v1/messages as it holds chat: past it, 402 in Anthropic shape; spent is what was billed', async () => {
    const u = await fundedUser(h, 100_000_000n);
    const api = (method: string, path: string, body?: unknown) => h.t.request(method, path, { token: u.user.token, body });
    const created = await api('POST', '/api/api-keys', { name: 'budget', spend_limit: 0.25, spend_period: 'day' });
    const client = anthropicFor(created.body.key as string);
    const margins = async () => Number((await h.t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from key_spend_grants where key_id = ${created.body.id} and margin`))[0]!.n);
    // 0.1 a request (per-request price): 0.1 + 0.1 are covered; the third is at the margin (0.2 < 0.25) and may cross.
    for (let i = 0; i < 3; i++) {
      expect((await client.messages.create({ model: HAIKU, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] })).type).toBe('message');
      await h.t.services.router.flushUsage();
      await waitFor(margins, 'the key margin given back', { until: (n) => n === 0 });
    }
    const err = await client.messages.create({ model: HAIKU, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
    expect(err.status).toBe(402);
    expect(err.error).toEqual({ type: 'error', error: { type: 'billing_error', message: 'key spend limit reached' } });
    const listed = ((await api('GET', '/api/api-keys')).body as Array<{ id: string; spent: number }>).find((k) => k.id === created.body.id)!;
    expect(listed.spent).toBe(0.3);
    expect(await u.balance()).toBe(100_000_000n - 300_000n);
  });
});

/** The fake upstream speaks OpenAI's protocol as the official client reads it. */
import { afterAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { startFakeUpstream } from '../../support/fake-upstream';
import { waitFor } from '../../support/wait';

const up = await startFakeUpstream({ models: ['m1'] });
const client = new OpenAI({ baseURL: up.url, apiKey: 'x', maxRetries: 0 });
afterAll(() => up.close());

describe('fake upstream', () => {
  test('lists models and answers JSON with usage', async () => {
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['m1']);
    const r = await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    expect(r.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
  });

  test('streams one chunk per piece and usage only when asked', async () => {
    up.set({ content: 'a b c' });
    const chunks = [];
    for await (const c of await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }))
      chunks.push(c);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('a b c');
    expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 });
    const plain = [];
    for await (const c of await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true })) plain.push(c);
    expect(plain.some((c) => c.usage)).toBe(false);
  });

  test('tool calls, errors and garbage', async () => {
    up.set({ toolCalls: [{ name: 'lookup', arguments: '{"q":1}' }] });
    const r = await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.choices[0]!.finish_reason).toBe('tool_calls');
    expect(r.choices[0]!.message.tool_calls![0]).toMatchObject({ type: 'function', function: { name: 'lookup', arguments: '{"q":1}' } });
    up.set({ toolCalls: null, status: 503 });
    const failed = await client.chat.completions.create({ model: 'm1', messages: [] }).then(() => null, (e) => e);
    expect(failed).toMatchObject({ status: 503 });
    up.set({ status: null, garbage: true });
    const res = await fetch(`${up.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'm1', messages: [] }) });
    expect(await res.text()).toContain('<html>');
    expect(up.requests.at(-1)!.body).toEqual({ model: 'm1', messages: [] });
    up.reset();
    expect(up.requests).toHaveLength(0);
  });

  test('n choices, each stopped at the maximum (reasoning included), completion tokens summed: JSON and stream', async () => {
    up.set({ reasoning: 'hmm let me ', content: 'one two three four five' });
    const asked = { model: 'm1', messages: [{ role: 'user' as const, content: 'hi' }], n: 3, max_completion_tokens: 5 };
    const r = await client.chat.completions.create(asked);
    expect(r.choices.map((c) => [c.index, c.message.content, (c.message as { reasoning_content?: string }).reasoning_content, c.finish_reason])).toEqual([
      [0, 'one two ', 'hmm let me ', 'length'],
      [1, 'one two ', 'hmm let me ', 'length'],
      [2, 'one two ', 'hmm let me ', 'length'],
    ]);
    expect(r.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 15, completion_tokens_details: { reasoning_tokens: 9 } });
    const text = ['', '', ''];
    let usage: unknown = null;
    for await (const c of await client.chat.completions.create({ ...asked, max_completion_tokens: undefined, max_tokens: 4, stream: true, stream_options: { include_usage: true } })) {
      for (const choice of c.choices) text[choice.index] += (choice.delta as { reasoning_content?: string }).reasoning_content ?? choice.delta.content ?? '';
      if (c.usage) usage = c.usage;
    }
    expect(text).toEqual(['hmm let me one ', 'hmm let me one ', 'hmm let me one ']);
    expect(usage).toMatchObject({ completion_tokens: 12 });
    up.reset();
  });

  test('reasoning as `reasoning`, refusals and legacy function calls, as the servers send them', async () => {
    up.set({ reasoning: 'so', reasoningField: 'reasoning', content: 'yes' });
    const first = (await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] })).choices[0]!;
    expect(first.message).toMatchObject({ content: 'yes', reasoning: 'so' });
    up.set({ reasoning: '', refusal: 'I cannot do that.' });
    const refused = (await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] })).choices[0]!;
    expect(refused.message).toMatchObject({ content: null, refusal: 'I cannot do that.' });
    up.set({ refusal: null, functionCall: { name: 'lookup', arguments: '{"q": 1}' } });
    const called = (await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] })).choices[0]!;
    expect([called.finish_reason, called.message.function_call]).toEqual(['function_call', { name: 'lookup', arguments: '{"q": 1}' }]);
    let args = '';
    for await (const c of await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true })) args += c.choices[0]?.delta.function_call?.arguments ?? '';
    expect(args).toBe('{"q": 1}');
    up.reset();
  });

  test('counts a stream the client abandons', async () => {
    up.set({ content: 'w '.repeat(50), chunkDelayMs: 5 });
    const ac = new AbortController();
    const res = await fetch(`${up.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'm1', messages: [], stream: true }), signal: ac.signal });
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    await waitFor(() => up.stats.streamsAborted > 0, 'the abandoned stream to be counted');
    expect(up.stats.streamsAborted).toBe(1);
    up.reset();
  });
});

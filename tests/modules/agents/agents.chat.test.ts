/** The pure conversation helpers: history → chat messages and tools, streamed tool-call fragments → calls. */
import { describe, expect, test } from 'bun:test';
import { chatMessages, chatRequest, readChunk, ToolCallCollector } from '../../../src/modules/agents/agents.chat';
import type { agentItems } from '../../../src/modules/agents/agents.tables';

type Item = typeof agentItems.$inferSelect;
let seq = 0;
const item = (fields: Partial<Item> & Pick<Item, 'type' | 'turnId'>): Item => ({
  id: `item_${++seq}`,
  seq,
  sessionId: 'sess_1',
  role: null,
  content: null,
  callId: null,
  name: null,
  arguments: null,
  output: null,
  createdAt: new Date(0),
  ...fields,
});

describe('agent chat helpers', () => {
  test('flat (Agents beta) and nested (chat completions) function tools both become chat tools', () => {
    const req = chatRequest(
      {
        id: 'agent_1',
        name: null,
        model: 'm',
        instructions: null,
        tools: [
          { type: 'function', name: 'flat', parameters: { type: 'object' } },
          { type: 'function', function: { name: 'nested', description: 'd', parameters: { type: 'object' }, strict: true } },
        ],
      },
      [item({ type: 'message', role: 'user', content: 'hi', turnId: 't1' })],
    );
    expect(req.tools).toEqual([
      { type: 'function', function: { name: 'flat', parameters: { type: 'object' } } },
      { type: 'function', function: { name: 'nested', description: 'd', parameters: { type: 'object' }, strict: true } },
    ]);
    expect(req.messages).toEqual([{ role: 'user', content: 'hi' }]);
    expect(req).toMatchObject({ model: 'm', stream: true, stream_options: { include_usage: true } });
  });

  test("a turn's text and tool calls are one assistant message; results are tool messages", () => {
    const messages = chatMessages('sys', [
      item({ type: 'message', role: 'user', content: 'q', turnId: 't1' }),
      item({ type: 'message', role: 'assistant', content: 'Let me look.', turnId: 't1' }),
      item({ type: 'function_call', callId: 'c1', name: 'f', arguments: '{"a":1}', turnId: 't1' }),
      item({ type: 'function_call', callId: 'c2', name: 'g', arguments: '{}', turnId: 't1' }),
      item({ type: 'function_call_output', callId: 'c1', output: 'one', turnId: 't1' }),
      item({ type: 'function_call_output', callId: 'c2', output: 'two', turnId: 't1' }),
      item({ type: 'message', role: 'assistant', content: 'Done.', turnId: 't2' }),
    ]);
    expect(messages).toEqual([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'q' },
      {
        role: 'assistant',
        content: 'Let me look.',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } },
          { id: 'c2', type: 'function', function: { name: 'g', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'one' },
      { role: 'tool', tool_call_id: 'c2', content: 'two' },
      { role: 'assistant', content: 'Done.' },
    ]);
  });

  test('tool-call fragments spread over chunks are joined by index', () => {
    const calls = new ToolCallCollector();
    const chunks = [
      { choices: [{ delta: { tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_', arguments: '' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { name: 'weather', arguments: '{"ci' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 1, id: 'call_b', function: { name: 'other', arguments: '{}' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: 'ty":"Paris"}' } }] } }] },
      { choices: [], usage: { prompt_tokens: 7, completion_tokens: 3 } },
    ];
    let usage = null;
    for (const c of chunks) {
      const read = readChunk(c);
      calls.add(read.toolCalls);
      usage = read.usage ?? usage;
    }
    expect(calls.result()).toEqual([
      { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_b', type: 'function', function: { name: 'other', arguments: '{}' } },
    ]);
    expect(usage).toEqual({ input: 7, output: 3 });
  });

  test('malformed chunks are skipped, not thrown on', () => {
    for (const chunk of [{}, { choices: null }, { choices: [null] }, { choices: [{ delta: { content: 5, tool_calls: 'x' } }] }, { usage: 'x' }])
      expect(readChunk(chunk as Record<string, unknown>)).toEqual({ content: '', toolCalls: [], usage: null });
    const calls = new ToolCallCollector();
    calls.add([{ function: { name: 'f' } }]);
    expect(calls.result()[0]!.id).toMatch(/^call_/);
  });
});

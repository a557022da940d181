/** Chat chunks → Anthropic stream events: the shapes servers really send (vLLM, DeepSeek) that the fake upstream does not. */
import { describe, expect, test } from 'bun:test';
import { MessageAssembler, messageUsageOf } from '../../../src/modules/gateway/gateway.messages';

const chunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) => ({ choices: [{ index: 0, delta, finish_reason: finish, ...extra }] });

describe('MessageAssembler', () => {
  test('an empty first content delta (vLLM opens with content "") opens no block: the thinking block comes first', () => {
    const a = new MessageAssembler({}, 'm');
    const events = [
      ...a.start(),
      ...a.chunk(chunk({ role: 'assistant', content: '' })),
      ...a.chunk(chunk({ reasoning_content: 'hmm', content: null })),
      ...a.chunk(chunk({ content: '' })),
      ...a.chunk(chunk({ content: 'yes' })),
      ...a.chunk(chunk({}, 'stop')),
      ...a.finish({ prompt_tokens: 5, completion_tokens: 2, cost: 0.001 }),
    ];
    expect(events.map((e) => (e.type === 'content_block_start' ? `start:${(e.content_block as { type: string }).type}` : e.type))).toEqual([
      'message_start',
      'start:thinking',
      'content_block_delta',
      'content_block_stop',
      'start:text',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events.filter((e) => e.type === 'content_block_start').map((e) => e.index)).toEqual([0, 1]);
  });

  test('tool calls after text: the text block closes, each call is its own tool_use block with its arguments streamed', () => {
    const a = new MessageAssembler({}, 'm');
    const events = [
      ...a.chunk(chunk({ content: 'let me look' })),
      ...a.chunk(chunk({ tool_calls: [{ index: 0, id: 'c1', function: { name: 'f', arguments: '' } }] })),
      ...a.chunk(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] })),
      ...a.chunk(chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] })),
      ...a.chunk(chunk({ tool_calls: [{ index: 1, id: 'c2', function: { name: 'g', arguments: '{}' } }] })),
      ...a.chunk(chunk({}, 'tool_calls')),
      ...a.finish({ prompt_tokens: 5, completion_tokens: 9 }),
    ];
    const starts = events.filter((e) => e.type === 'content_block_start').map((e) => e.content_block);
    expect(starts).toEqual([
      { type: 'text', text: '' },
      { type: 'tool_use', id: 'c1', name: 'f', input: {} },
      { type: 'tool_use', id: 'c2', name: 'g', input: {} },
    ]);
    const json = events.flatMap((e) => (e.type === 'content_block_delta' && (e.delta as { type: string }).type === 'input_json_delta' ? [[e.index, (e.delta as { partial_json: string }).partial_json]] : []));
    expect(json).toEqual([
      [1, '{"a":'],
      [1, '1}'],
      [2, '{}'],
    ]);
    expect(events.at(-2)).toMatchObject({ type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null } });
  });

  test('a stop string the server names is a stop_sequence when it is one of the request\'s', () => {
    const a = new MessageAssembler({ stop_sequences: ['END'] }, 'm');
    const json = a.fromCompletion({ model: 'm', choices: [{ message: { content: 'done' }, finish_reason: 'stop', stop_reason: 'END' }], usage: { prompt_tokens: 3, completion_tokens: 1 } });
    expect(json).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
    const other = new MessageAssembler({}, 'm').fromCompletion({ choices: [{ message: { content: 'x' }, finish_reason: 'length' }] });
    expect(other).toMatchObject({ stop_reason: 'max_tokens', stop_sequence: null });
  });

  test('no finish reason before the end: an error event, no message_stop', () => {
    const a = new MessageAssembler({}, 'm');
    a.chunk(chunk({ content: 'half' }));
    expect(a.finish({ prompt_tokens: 1, completion_tokens: 1 })).toEqual([{ type: 'error', error: { type: 'api_error', message: 'the upstream stream ended before the answer was complete' } }]);
  });

  test('usage: the cached tokens leave input_tokens for cache_read_input_tokens, never counted twice', () => {
    expect(messageUsageOf({ prompt_tokens: 100, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 60 }, cost: 0.5 })).toEqual({
      input_tokens: 40,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 60,
      output_tokens: 7,
      cost: 0.5,
    });
  });
});

/** Anthropic usage → the counts billed: cache tokens once each, cumulative message_delta figures never summed. */
import { describe, expect, test } from 'bun:test';
import { createMessagesMeter, messageUsageCounts } from '../../../src/modules/metering';

describe('Anthropic usage', () => {
  test('the prompt is input + cache writes + cache reads; the cached tokens are the reads', () => {
    expect(messageUsageCounts({ input_tokens: 20, cache_creation_input_tokens: 100, cache_read_input_tokens: 1000, output_tokens: 7 })).toEqual({
      prompt: 1120,
      completion: 7,
      cached: 1000,
      reasoning: 0,
      counted: false,
    });
    expect(messageUsageCounts({ input_tokens: 20, output_tokens: 3 })).toMatchObject({ prompt: 20, cached: 0 });
    expect(messageUsageCounts({ output_tokens: 3 })).toBeNull();
    expect(messageUsageCounts(null)).toBeNull();
  });

  test('a stream: message_start, then message_deltas whose usage is cumulative; the last figures count', async () => {
    const meter = createMessagesMeter(async () => 999);
    meter.take('message_start', { message: { usage: { input_tokens: 30, cache_creation_input_tokens: 200, cache_read_input_tokens: 0, output_tokens: 1 } } });
    meter.take('content_block_delta', { delta: { type: 'text_delta', text: 'one two' } });
    meter.take('message_delta', { usage: { output_tokens: 5 } });
    meter.take('message_delta', { usage: { input_tokens: 30, cache_creation_input_tokens: 200, output_tokens: 9 } });
    meter.take('message_stop', {});
    expect(meter.complete).toBe(true);
    expect(await meter.counts('done')).toEqual({ prompt: 230, completion: 9, cached: 0, reasoning: 0, counted: false });
  });

  test('cut short: the prompt as message_start reported it, the completion as delivered (text, thinking, tool input)', async () => {
    const meter = createMessagesMeter(async () => 999);
    meter.take('message_start', { message: { usage: { input_tokens: 12, cache_read_input_tokens: 8, output_tokens: 1 } } });
    meter.take('content_block_delta', { delta: { type: 'thinking_delta', thinking: 'hmm' } });
    meter.take('content_block_start', { content_block: { type: 'tool_use', name: 'f' } });
    meter.take('content_block_delta', { delta: { type: 'input_json_delta', partial_json: '{"a"' } });
    const counts = await meter.counts('upstream');
    expect(counts).toMatchObject({ prompt: 20, cached: 8, counted: true });
    expect(counts.completion).toBeGreaterThan(0);
    expect(counts.reasoning).toBeGreaterThan(0);
    expect(meter.billable('upstream')).toBe(true);
    const silent = createMessagesMeter(async () => 42);
    expect(await silent.counts('upstream')).toMatchObject({ prompt: 42, completion: 0 });
    expect(silent.billable('upstream')).toBe(false);
  });
});

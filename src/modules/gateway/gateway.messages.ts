/**
 * Chat completions → Anthropic Messages API answers. A MessageAssembler builds one message: from a
 * whole chat completion (JSON), or event by event from chat chunks (SSE) in Anthropic's order:
 * message_start, then per content block content_block_start, its deltas and content_block_stop,
 * then message_delta (stop reason and the usage, with its cost) and message_stop; or an `error`
 * event when the upstream stream broke (what was delivered is billed all the same).
 *
 * Reasoning a chat backend sends (`reasoning_content` or `reasoning`) becomes a thinking block,
 * first, as Anthropic places it. Its signature is empty: a chat backend signs nothing, and when the
 * client sends the block back the translation leaves it out. A block opens only with its first
 * non-empty delta, so no empty text block ever stands before a thinking block.
 */
import { randomBase62 } from '../../platform/ids';
import type { Chunk } from '../metering';

type Json = Record<string, unknown>;

export interface AnthropicEvent {
  type: string;
  [field: string]: unknown;
}

interface ChatToolCall {
  id?: unknown;
  index?: unknown;
  function?: { name?: unknown; arguments?: unknown };
}

interface ChatMessage {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  refusal?: unknown;
  tool_calls?: ChatToolCall[];
}

const STOP_REASON: Record<string, string> = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use', function_call: 'tool_use', content_filter: 'refusal' };

/** Anthropic usage for a chat usage object: its input_tokens leave out the cache reads, reported apart. */
export function messageUsageOf(u: Json | undefined): Json {
  const prompt = Number(u?.prompt_tokens ?? 0);
  const cached = Math.min(prompt, Number((u?.prompt_tokens_details as { cached_tokens?: number } | undefined)?.cached_tokens ?? u?.cache_read_input_tokens ?? 0));
  return {
    input_tokens: prompt - cached,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    output_tokens: Number(u?.completion_tokens ?? 0),
    ...(u?.cost !== undefined ? { cost: u.cost } : {}),
  };
}

const reasoningOf = (m: ChatMessage) => (typeof m.reasoning_content === 'string' ? m.reasoning_content : typeof m.reasoning === 'string' ? m.reasoning : '');

/** A tool call's arguments as the input object Anthropic carries (arguments that are not a JSON object are kept under `arguments`). */
function inputOf(args: string): Json {
  try {
    const parsed = JSON.parse(args || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Json;
  } catch {}
  return { arguments: args };
}

interface OpenBlock {
  kind: 'thinking' | 'text' | 'tool_use';
  index: number;
  /** The chat tool call index, for tool_use blocks. */
  call?: number;
}

export class MessageAssembler {
  readonly id = `msg_${randomBase62(24)}`;
  private next = 0;
  private open: OpenBlock | null = null;
  private finishReason: string | null = null;
  private stopSequence: string | null = null;

  constructor(
    /** The Messages request (its stop_sequences tell which stop was met). */
    private readonly request: Json,
    private model: string,
  ) {}

  private stopOf(choice: { finish_reason?: unknown; stop_reason?: unknown }) {
    const finish = typeof choice.finish_reason === 'string' ? choice.finish_reason : null;
    // vLLM names the stop string it met (`stop_reason`); one of the caller's is a stop sequence.
    const met = typeof choice.stop_reason === 'string' && Array.isArray(this.request.stop_sequences) && this.request.stop_sequences.includes(choice.stop_reason) ? choice.stop_reason : null;
    return { reason: finish === null ? null : met ? 'stop_sequence' : (STOP_REASON[finish] ?? 'end_turn'), sequence: met };
  }

  /** The whole message for a chat completion (JSON answers). */
  fromCompletion(completion: Chunk): Json {
    if (typeof completion.model === 'string') this.model = completion.model;
    const choice = (completion.choices as Array<{ message?: ChatMessage; finish_reason?: unknown; stop_reason?: unknown }> | undefined)?.[0] ?? {};
    const message = choice.message ?? {};
    const content: Json[] = [];
    const reasoning = reasoningOf(message);
    if (reasoning) content.push({ type: 'thinking', thinking: reasoning, signature: '' });
    const text = typeof message.content === 'string' ? message.content : typeof message.refusal === 'string' ? message.refusal : '';
    if (text) content.push({ type: 'text', text });
    for (const call of message.tool_calls ?? [])
      content.push({ type: 'tool_use', id: String(call.id ?? `toolu_${randomBase62(24)}`), name: String(call.function?.name ?? ''), input: inputOf(String(call.function?.arguments ?? '')) });
    const stop = this.stopOf(choice);
    return {
      id: this.id,
      type: 'message',
      role: 'assistant',
      model: this.model,
      content,
      stop_reason: stop.reason ?? 'end_turn',
      stop_sequence: stop.sequence,
      usage: messageUsageOf(completion.usage as Json | undefined),
    };
  }

  /** The event that opens a stream. */
  start(): AnthropicEvent[] {
    return [
      {
        type: 'message_start',
        message: { id: this.id, type: 'message', role: 'assistant', model: this.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } },
      },
    ];
  }

  private close(): AnthropicEvent[] {
    if (!this.open) return [];
    const index = this.open.index;
    this.open = null;
    return [{ type: 'content_block_stop', index }];
  }

  /** Opens a block of `kind` unless that block is the one open (`call`: the chat tool call it is). */
  private ensure(kind: OpenBlock['kind'], block: Json, call?: number): AnthropicEvent[] {
    if (this.open?.kind === kind && this.open.call === call) return [];
    const events = this.close();
    this.open = { kind, index: this.next++, call };
    events.push({ type: 'content_block_start', index: this.open.index, content_block: block });
    return events;
  }

  /** The events for one chat chunk. */
  chunk(chunk: Chunk): AnthropicEvent[] {
    const events: AnthropicEvent[] = [];
    const choice = (chunk.choices as Array<{ delta?: ChatMessage; finish_reason?: unknown; stop_reason?: unknown }> | undefined)?.[0];
    if (!choice) return events;
    const delta = choice.delta ?? {};
    const reasoning = reasoningOf(delta);
    if (reasoning) {
      events.push(...this.ensure('thinking', { type: 'thinking', thinking: '', signature: '' }));
      events.push({ type: 'content_block_delta', index: this.open!.index, delta: { type: 'thinking_delta', thinking: reasoning } });
    }
    const text = typeof delta.content === 'string' && delta.content !== '' ? delta.content : typeof delta.refusal === 'string' ? delta.refusal : '';
    if (text) {
      events.push(...this.ensure('text', { type: 'text', text: '' }));
      events.push({ type: 'content_block_delta', index: this.open!.index, delta: { type: 'text_delta', text } });
    }
    for (const call of delta.tool_calls ?? []) {
      const key = Number.isInteger(call.index) ? (call.index as number) : 0;
      if (!(this.open?.kind === 'tool_use' && this.open.call === key))
        events.push(...this.ensure('tool_use', { type: 'tool_use', id: String(call.id ?? `toolu_${randomBase62(24)}`), name: String(call.function?.name ?? ''), input: {} }, key));
      const args = call.function?.arguments;
      if (typeof args === 'string' && args !== '') events.push({ type: 'content_block_delta', index: this.open!.index, delta: { type: 'input_json_delta', partial_json: args } });
    }
    const stop = this.stopOf(choice);
    if (stop.reason) {
      this.finishReason = stop.reason;
      this.stopSequence = stop.sequence;
    }
    return events;
  }

  /** The closing events, given the final chunk's usage (with cost); an `error` event when the upstream broke off. */
  finish(usage: Json | undefined): AnthropicEvent[] {
    if (this.finishReason === null) return [{ type: 'error', error: { type: 'api_error', message: 'the upstream stream ended before the answer was complete' } }];
    return [
      ...this.close(),
      { type: 'message_delta', delta: { stop_reason: this.finishReason, stop_sequence: this.stopSequence }, usage: messageUsageOf(usage) },
      { type: 'message_stop' },
    ];
  }
}

/**
 * What a capture keeps of a passed-through stream's event, in the chat chunk shape captures read
 * (text, tool calls, finish reason, usage); null for events that add nothing to it.
 */
export function captureChunkOf(event: string, data: Chunk): Chunk | null {
  const delta = (data.delta ?? {}) as Json;
  const index = Number(data.index ?? 0);
  const chunk = (d: Json, extra: Json = {}) => ({ choices: [{ index: 0, delta: d, ...extra }] });
  if (event === 'content_block_delta' && typeof delta.text === 'string') return chunk({ content: delta.text });
  if (event === 'content_block_delta' && typeof delta.partial_json === 'string') return chunk({ tool_calls: [{ index, function: { arguments: delta.partial_json } }] });
  const block = data.content_block as Json | undefined;
  if (event === 'content_block_start' && block?.type === 'tool_use') return chunk({ tool_calls: [{ index, id: block.id, function: { name: block.name } }] });
  if (event === 'message_delta') return { ...chunk({}, { finish_reason: delta.stop_reason ?? null }), usage: data.usage };
  return null;
}

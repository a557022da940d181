/**
 * Chat completions → OpenAI Responses objects and stream events. A ResponseAssembler builds one
 * response: from a whole chat completion (JSON), or event by event from chat chunks (SSE), in the
 * order OpenAI's own stream has: response.created, response.in_progress, then per output item
 * output_item.added, its deltas (content_part.added + output_text.delta, or
 * function_call_arguments.delta), their .done events and output_item.done, and last
 * response.completed (or response.incomplete when the model stopped at max_output_tokens, or
 * response.failed when the upstream stream broke) carrying the usage and its cost.
 */
import { randomBase62 } from '../../platform/ids';
import type { Chunk } from '../metering';

type Json = Record<string, unknown>;

export interface ResponseEvent {
  type: string;
  [field: string]: unknown;
}

interface OpenItem {
  index: number;
  item: Json;
  /** Accumulated text (message) or arguments (function call). */
  text: string;
}

interface ChatMessage {
  content?: unknown;
  refusal?: unknown;
  tool_calls?: Array<{ id?: unknown; index?: unknown; function?: { name?: unknown; arguments?: unknown } }>;
}

/** The Responses usage object for a chat usage object (with the gateway's `cost`). */
function usageOf(u: Json | undefined): Json | null {
  if (!u) return null;
  const input = Number(u.prompt_tokens ?? 0);
  const output = Number(u.completion_tokens ?? 0);
  const cached = (u.prompt_tokens_details as { cached_tokens?: number } | undefined)?.cached_tokens ?? 0;
  const reasoning = (u.completion_tokens_details as { reasoning_tokens?: number } | undefined)?.reasoning_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
    cost: u.cost,
  };
}

const INCOMPLETE_REASON: Record<string, string> = { length: 'max_output_tokens', content_filter: 'content_filter' };

export class ResponseAssembler {
  readonly id = `resp_${randomBase62(32)}`;
  private readonly createdAt = Math.floor(Date.now() / 1000);
  private readonly output: Json[] = [];
  private sequence = 0;
  private message: OpenItem | null = null;
  /** Function calls being streamed, by the chat tool call index. */
  private readonly calls = new Map<number, OpenItem>();
  private finishReason: string | null = null;

  constructor(
    /** The Responses request, whose settings the response echoes. */
    private readonly request: Json,
    private model: string,
  ) {}

  /** The response object as it stands. */
  private snapshot(status: string, usage: Json | null, extra: Json = {}): Json {
    const r = this.request;
    return {
      id: this.id,
      object: 'response',
      created_at: this.createdAt,
      status,
      background: false,
      error: null,
      incomplete_details: null,
      instructions: r.instructions ?? null,
      max_output_tokens: r.max_output_tokens ?? null,
      metadata: r.metadata ?? {},
      model: this.model,
      output: structuredClone(this.output),
      parallel_tool_calls: r.parallel_tool_calls ?? true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      store: false,
      temperature: r.temperature ?? 1,
      text: r.text ?? { format: { type: 'text' } },
      tool_choice: r.tool_choice ?? 'auto',
      tools: r.tools ?? [],
      top_p: r.top_p ?? 1,
      truncation: 'disabled',
      usage,
      user: r.user ?? null,
      ...extra,
    };
  }

  private event(type: string, fields: Json): ResponseEvent {
    return { type, sequence_number: this.sequence++, ...fields };
  }

  private endStatus(): { status: string; extra: Json } {
    const reason = this.finishReason ? INCOMPLETE_REASON[this.finishReason] : undefined;
    if (reason) return { status: 'incomplete', extra: { incomplete_details: { reason } } };
    return { status: 'completed', extra: {} };
  }

  private messageItem(text: string, refusal: string | null, status: string): Json {
    const content = refusal !== null ? [{ type: 'refusal', refusal }] : [{ type: 'output_text', text, annotations: [], logprobs: [] }];
    return { id: `msg_${randomBase62(32)}`, type: 'message', status, role: 'assistant', content };
  }

  private callItem(callId: string, name: string, args: string, status: string): Json {
    return { id: `fc_${randomBase62(32)}`, type: 'function_call', status, call_id: callId, name, arguments: args };
  }

  /** The whole response for a chat completion (JSON answers). */
  fromCompletion(completion: Chunk): Json {
    if (typeof completion.model === 'string') this.model = completion.model;
    const choice = (completion.choices as Array<{ message?: ChatMessage; finish_reason?: unknown }> | undefined)?.[0];
    const message = choice?.message ?? {};
    this.finishReason = typeof choice?.finish_reason === 'string' ? choice.finish_reason : null;
    const text = typeof message.content === 'string' ? message.content : '';
    const refusal = typeof message.refusal === 'string' ? message.refusal : null;
    if (text !== '' || refusal !== null || !message.tool_calls?.length) this.output.push(this.messageItem(text, refusal, 'completed'));
    for (const call of message.tool_calls ?? [])
      this.output.push(this.callItem(String(call.id ?? `call_${randomBase62(24)}`), String(call.function?.name ?? ''), String(call.function?.arguments ?? ''), 'completed'));
    const { status, extra } = this.endStatus();
    return this.snapshot(status, usageOf(completion.usage as Json | undefined), extra);
  }

  /** The events that open a stream. */
  start(): ResponseEvent[] {
    const response = this.snapshot('in_progress', null);
    return [this.event('response.created', { response }), this.event('response.in_progress', { response })];
  }

  /** The events for one chat chunk. */
  chunk(chunk: Chunk): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    const choice = (chunk.choices as Array<{ delta?: ChatMessage; finish_reason?: unknown }> | undefined)?.[0];
    if (!choice) return events;
    if (typeof choice.finish_reason === 'string') this.finishReason = choice.finish_reason;
    const delta = choice.delta ?? {};
    if (typeof delta.content === 'string' && delta.content !== '') events.push(...this.textDelta(delta.content));
    for (const call of delta.tool_calls ?? []) events.push(...this.callDelta(call));
    return events;
  }

  private textDelta(text: string): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (!this.message) {
      const item: Json = { ...this.messageItem('', null, 'in_progress'), content: [] };
      this.message = { index: this.output.length, item, text: '' };
      this.output.push(item);
      events.push(this.event('response.output_item.added', { output_index: this.message.index, item: structuredClone(item) }));
      events.push(this.event('response.content_part.added', { item_id: item.id, output_index: this.message.index, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } }));
    }
    this.message.text += text;
    events.push(this.event('response.output_text.delta', { item_id: this.message.item.id, output_index: this.message.index, content_index: 0, delta: text, logprobs: [] }));
    return events;
  }

  private callDelta(call: NonNullable<ChatMessage['tool_calls']>[number]): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    const key = Number.isInteger(call.index) ? (call.index as number) : this.calls.size;
    let open = this.calls.get(key);
    if (!open) {
      // A tool call after text: the text is complete (chat sends text first, then calls).
      if (this.message) events.push(...this.closeMessage());
      const item = this.callItem(String(call.id ?? `call_${randomBase62(24)}`), String(call.function?.name ?? ''), '', 'in_progress');
      open = { index: this.output.length, item, text: '' };
      this.calls.set(key, open);
      this.output.push(item);
      events.push(this.event('response.output_item.added', { output_index: open.index, item: structuredClone(item) }));
    } else if (typeof call.function?.name === 'string' && call.function.name !== '') {
      open.item.name = `${open.item.name}${call.function.name}`;
    }
    const args = call.function?.arguments;
    if (typeof args === 'string' && args !== '') {
      open.text += args;
      open.item.arguments = open.text;
      events.push(this.event('response.function_call_arguments.delta', { item_id: open.item.id, output_index: open.index, delta: args }));
    }
    return events;
  }

  private closeMessage(): ResponseEvent[] {
    const m = this.message!;
    this.message = null;
    const part = { type: 'output_text', text: m.text, annotations: [], logprobs: [] };
    m.item.content = [part];
    m.item.status = 'completed';
    return [
      this.event('response.output_text.done', { item_id: m.item.id, output_index: m.index, content_index: 0, text: m.text, logprobs: [] }),
      this.event('response.content_part.done', { item_id: m.item.id, output_index: m.index, content_index: 0, part }),
      this.event('response.output_item.done', { output_index: m.index, item: structuredClone(m.item) }),
    ];
  }

  /** The closing events, given the final chunk's usage (with cost). */
  finish(usage: Json | undefined): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (this.message) events.push(...this.closeMessage());
    for (const c of [...this.calls.values()].sort((a, b) => a.index - b.index)) {
      c.item.status = 'completed';
      events.push(this.event('response.function_call_arguments.done', { item_id: c.item.id, output_index: c.index, name: c.item.name, arguments: c.text }));
      events.push(this.event('response.output_item.done', { output_index: c.index, item: structuredClone(c.item) }));
    }
    this.calls.clear();
    const u = usageOf(usage);
    // No finish reason: the upstream stream broke; what was delivered is billed and reported as failed.
    if (this.finishReason === null)
      return [...events, this.event('response.failed', { response: this.snapshot('failed', u, { error: { code: 'server_error', message: 'the upstream stream ended before the answer was complete' } }) })];
    const { status, extra } = this.endStatus();
    return [...events, this.event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: this.snapshot(status, u, extra) })];
  }
}

/**
 * Chat completions → OpenAI Responses objects and stream events. A ResponseAssembler builds one
 * response: from a whole chat completion (JSON), or event by event from chat chunks (SSE), in the
 * order OpenAI's own stream has: response.created, response.in_progress, then per output item
 * output_item.added, its parts and deltas, their .done events and output_item.done, and last
 * response.completed (or response.incomplete when the model stopped at max_output_tokens, or
 * response.failed when the upstream stream broke) carrying the usage and its cost.
 *
 * Output items, in the order the chat answer brings them:
 * - reasoning (the backend's `reasoning_content` or `reasoning`): a reasoning item with one
 *   summary part (reasoning_summary_part.added, reasoning_summary_text.delta/.done,
 *   reasoning_summary_part.done): chat backends send their reasoning as readable text, which is
 *   what a Responses client shows from a summary;
 * - text or a refusal: a message item with one content part (content_part.added,
 *   output_text.delta/.done or refusal.delta/.done, content_part.done);
 * - tool calls: a function_call item each (function_call_arguments.delta/.done); a call of a
 *   custom tool (sent to chat as a function with one `input` string) a custom_tool_call item
 *   whose input is sent whole once the call is complete (custom_tool_call_input.delta/.done), as
 *   it is read out of the call's JSON arguments.
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
  /** Accumulated text (reasoning, message text or refusal) or arguments (tool call). */
  text: string;
}

/** A custom tool's input, out of the chat function call's arguments (`{"input": …}`); the arguments themselves when the model wrote something else. */
function customInputOf(args: string): string {
  try {
    const parsed = JSON.parse(args) as unknown;
    if (parsed && typeof parsed === 'object' && typeof (parsed as Json).input === 'string') return (parsed as Json).input as string;
  } catch {}
  return args;
}

/** What an open item other than a function call holds. */
type PieceKind = 'reasoning' | 'text' | 'refusal';

interface ChatMessage {
  content?: unknown;
  refusal?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
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

/** The reasoning a chat message or delta carries, in either field backends use (DeepSeek and vLLM: reasoning_content; others: reasoning). */
function reasoningOf(m: ChatMessage): string {
  if (typeof m.reasoning_content === 'string') return m.reasoning_content;
  return typeof m.reasoning === 'string' ? m.reasoning : '';
}

const textPart = (text: string) => ({ type: 'output_text', text, annotations: [], logprobs: [] });
const summaryPart = (text: string) => ({ type: 'summary_text', text });

export class ResponseAssembler {
  readonly id = `resp_${randomBase62(32)}`;
  private readonly createdAt = Math.floor(Date.now() / 1000);
  private readonly output: Json[] = [];
  private sequence = 0;
  /** The open reasoning or message item, and what it holds. */
  private open: (OpenItem & { kind: PieceKind }) | null = null;
  /** Function calls being streamed, by the chat tool call index. */
  private readonly calls = new Map<number, OpenItem>();
  private finishReason: string | null = null;

  constructor(
    /** The Responses request, whose settings the response echoes. */
    private readonly request: Json,
    private model: string,
    /** The names of the request's custom tools. */
    private readonly customTools: ReadonlySet<string> = new Set(),
  ) {}

  /** The response object as it stands. */
  private snapshot(status: string, usage: Json | null, extra: Json = {}): Json {
    const r = this.request;
    const reasoning = (r.reasoning && typeof r.reasoning === 'object' ? r.reasoning : {}) as Json;
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
      previous_response_id: r.previous_response_id ?? null,
      reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null },
      store: r.store !== false,
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

  private reasoningItem(text: string | null): Json {
    return { id: `rs_${randomBase62(32)}`, type: 'reasoning', summary: text === null ? [] : [summaryPart(text)] };
  }

  private messageItem(text: string, refusal: string | null, status: string): Json {
    const content = refusal !== null ? [{ type: 'refusal', refusal }] : [textPart(text)];
    return { id: `msg_${randomBase62(32)}`, type: 'message', status, role: 'assistant', content };
  }

  private callItem(callId: string, name: string, args: string, status: string): Json {
    if (this.customTools.has(name)) return { id: `ctc_${randomBase62(32)}`, type: 'custom_tool_call', status, call_id: callId, name, input: args === '' ? '' : customInputOf(args) };
    return { id: `fc_${randomBase62(32)}`, type: 'function_call', status, call_id: callId, name, arguments: args };
  }

  /** The whole response for a chat completion (JSON answers). */
  fromCompletion(completion: Chunk): Json {
    if (typeof completion.model === 'string') this.model = completion.model;
    const choice = (completion.choices as Array<{ message?: ChatMessage; finish_reason?: unknown }> | undefined)?.[0];
    const message = choice?.message ?? {};
    this.finishReason = typeof choice?.finish_reason === 'string' ? choice.finish_reason : null;
    const reasoning = reasoningOf(message);
    if (reasoning !== '') this.output.push(this.reasoningItem(reasoning));
    const text = typeof message.content === 'string' ? message.content : '';
    const refusal = typeof message.refusal === 'string' ? message.refusal : null;
    if (text !== '' || refusal !== null || (!message.tool_calls?.length && reasoning === '')) this.output.push(this.messageItem(text, refusal, 'completed'));
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
    const reasoning = reasoningOf(delta);
    if (reasoning !== '') events.push(...this.piece('reasoning', reasoning));
    if (typeof delta.content === 'string' && delta.content !== '') events.push(...this.piece('text', delta.content));
    if (typeof delta.refusal === 'string' && delta.refusal !== '') events.push(...this.piece('refusal', delta.refusal));
    for (const call of delta.tool_calls ?? []) events.push(...this.callDelta(call));
    return events;
  }

  /** A piece of reasoning, text or refusal: into the open item of its kind, opened (and the previous one closed) when needed. */
  private piece(kind: PieceKind, delta: string): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (this.open && this.open.kind !== kind) events.push(...this.closeOpen('completed'));
    if (!this.open) {
      const item = kind === 'reasoning' ? this.reasoningItem(null) : { ...this.messageItem('', null, 'in_progress'), content: [] };
      const open = { kind, index: this.output.length, item, text: '' };
      this.open = open;
      this.output.push(item);
      const at = { item_id: item.id, output_index: open.index };
      events.push(this.event('response.output_item.added', { output_index: open.index, item: structuredClone(item) }));
      if (kind === 'reasoning') events.push(this.event('response.reasoning_summary_part.added', { ...at, summary_index: 0, part: summaryPart('') }));
      else events.push(this.event('response.content_part.added', { ...at, content_index: 0, part: kind === 'text' ? textPart('') : { type: 'refusal', refusal: '' } }));
    }
    const open = this.open;
    open.text += delta;
    const at = { item_id: open.item.id, output_index: open.index };
    if (kind === 'reasoning') events.push(this.event('response.reasoning_summary_text.delta', { ...at, summary_index: 0, delta }));
    else if (kind === 'text') events.push(this.event('response.output_text.delta', { ...at, content_index: 0, delta, logprobs: [] }));
    else events.push(this.event('response.refusal.delta', { ...at, content_index: 0, delta }));
    return events;
  }

  private callDelta(call: NonNullable<ChatMessage['tool_calls']>[number]): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    const key = Number.isInteger(call.index) ? (call.index as number) : this.calls.size;
    let open = this.calls.get(key);
    if (!open) {
      // A tool call after text or reasoning: that item is complete (chat sends them first, then calls).
      if (this.open) events.push(...this.closeOpen('completed'));
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
      // A custom tool's input is read out of the whole arguments, at the end.
      if (open.item.type === 'function_call') {
        open.item.arguments = open.text;
        events.push(this.event('response.function_call_arguments.delta', { item_id: open.item.id, output_index: open.index, delta: args }));
      }
    }
    return events;
  }

  /** The .done events of the open reasoning or message item; `status`: the message's, as the response ended. */
  private closeOpen(status: string): ResponseEvent[] {
    const o = this.open!;
    this.open = null;
    const at = { item_id: o.item.id, output_index: o.index };
    const events: ResponseEvent[] = [];
    if (o.kind === 'reasoning') {
      o.item.summary = [summaryPart(o.text)];
      events.push(this.event('response.reasoning_summary_text.done', { ...at, summary_index: 0, text: o.text }));
      events.push(this.event('response.reasoning_summary_part.done', { ...at, summary_index: 0, part: summaryPart(o.text) }));
    } else {
      const part = o.kind === 'text' ? textPart(o.text) : { type: 'refusal', refusal: o.text };
      o.item.content = [part];
      o.item.status = status;
      if (o.kind === 'text') events.push(this.event('response.output_text.done', { ...at, content_index: 0, text: o.text, logprobs: [] }));
      else events.push(this.event('response.refusal.done', { ...at, content_index: 0, refusal: o.text }));
      events.push(this.event('response.content_part.done', { ...at, content_index: 0, part }));
    }
    events.push(this.event('response.output_item.done', { output_index: o.index, item: structuredClone(o.item) }));
    return events;
  }

  /** The closing events, given the final chunk's usage (with cost); the last one carries the final response object. */
  finish(usage: Json | undefined): ResponseEvent[] {
    // No finish reason: the upstream stream broke; what was delivered is billed and reported as failed.
    const broke = this.finishReason === null;
    const { status, extra } = broke
      ? { status: 'failed', extra: { error: { code: 'server_error', message: 'the upstream stream ended before the answer was complete' } } }
      : this.endStatus();
    const itemStatus = status === 'completed' ? 'completed' : 'incomplete';
    const events: ResponseEvent[] = [];
    if (this.open) events.push(...this.closeOpen(itemStatus));
    for (const c of [...this.calls.values()].sort((a, b) => a.index - b.index)) {
      c.item.status = itemStatus;
      const at = { item_id: c.item.id, output_index: c.index };
      if (c.item.type === 'custom_tool_call') {
        const input = customInputOf(c.text);
        c.item.input = input;
        if (input !== '') events.push(this.event('response.custom_tool_call_input.delta', { ...at, delta: input }));
        events.push(this.event('response.custom_tool_call_input.done', { ...at, input }));
      } else events.push(this.event('response.function_call_arguments.done', { ...at, name: c.item.name, arguments: c.text }));
      events.push(this.event('response.output_item.done', { output_index: c.index, item: structuredClone(c.item) }));
    }
    this.calls.clear();
    const type = status === 'completed' ? 'response.completed' : `response.${status}`;
    return [...events, this.event(type, { response: this.snapshot(status, usageOf(usage), extra) })];
  }
}

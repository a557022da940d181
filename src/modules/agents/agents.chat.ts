/**
 * The conversation as the model sees it: session items → chat-completions messages and tools,
 * and streamed tool-call deltas → whole tool calls. Pure functions, no I/O.
 */
import { randomBase62 } from '../../platform/ids';
import type { BilledCaller } from './agents.service';
import { functionOf } from './agents.service';
import type { AgentSnapshot, agentItems } from './agents.tables';

type ItemRow = typeof agentItems.$inferSelect;

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: ChatToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

export type ChatRequest = {
  model: string;
  messages: ChatMessage[];
  tools?: Array<{ type: 'function'; function: Record<string, unknown> }>;
  stream: true;
  stream_options: { include_usage: true };
};

interface ToolCallDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/** What the agents module needs from the router: a streamed, metered and billed chat completion. */
export interface ChatModels {
  /** `requestId` ties the router's usage row to the turn. */
  streamChat(req: { caller: BilledCaller | null; body: ChatRequest; signal?: AbortSignal; requestId?: string }): AsyncIterable<Record<string, unknown>>;
}

/** The parts of an OpenAI chat.completion.chunk a turn uses; anything malformed is skipped. */
export function readChunk(chunk: Record<string, unknown>) {
  let content = '';
  const toolCalls: ToolCallDelta[] = [];
  for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
    const delta = (choice as { delta?: { content?: unknown; tool_calls?: unknown } } | null)?.delta;
    if (typeof delta?.content === 'string') content += delta.content;
    if (Array.isArray(delta?.tool_calls)) toolCalls.push(...(delta.tool_calls as ToolCallDelta[]));
  }
  const u = chunk.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  const usage = u && typeof u === 'object' ? { input: Number(u.prompt_tokens) || 0, output: Number(u.completion_tokens) || 0 } : null;
  return { content, toolCalls, usage };
}

export function chatRequest(agent: AgentSnapshot, items: ItemRow[]): ChatRequest {
  const tools = agent.tools.map((tool) => {
    const { name, description, parameters, strict } = functionOf(tool) as Record<string, unknown>;
    const fn = { name, ...(description ? { description } : {}), ...(parameters ? { parameters } : {}), ...(typeof strict === 'boolean' ? { strict } : {}) };
    return { type: 'function' as const, function: fn };
  });
  return {
    model: agent.model,
    messages: chatMessages(agent.instructions, items),
    ...(tools.length > 0 ? { tools } : {}),
    stream: true,
    stream_options: { include_usage: true },
  };
}

/** A turn's assistant text and its tool calls become one assistant message, as the model sent them. */
export function chatMessages(instructions: string | null, items: ItemRow[]): ChatMessage[] {
  const messages: ChatMessage[] = instructions ? [{ role: 'system', content: instructions }] : [];
  let assistant: Extract<ChatMessage, { role: 'assistant' }> | null = null;
  let assistantTurn: string | null = null;
  const assistantOf = (turnId: string) => {
    if (!assistant || assistantTurn !== turnId) {
      assistant = { role: 'assistant', content: null };
      assistantTurn = turnId;
      messages.push(assistant);
    }
    return assistant;
  };
  for (const item of items) {
    if (item.type === 'message' && item.role === 'user') {
      messages.push({ role: 'user', content: item.content ?? '' });
      assistant = null;
    } else if (item.type === 'message') {
      assistantOf(item.turnId).content = item.content ?? '';
    } else if (item.type === 'function_call') {
      const call: ChatToolCall = { id: item.callId!, type: 'function', function: { name: item.name!, arguments: item.arguments ?? '' } };
      const target = assistantOf(item.turnId);
      target.tool_calls = [...(target.tool_calls ?? []), call];
    } else {
      messages.push({ role: 'tool', tool_call_id: item.callId!, content: item.output ?? '' });
      assistant = null;
    }
  }
  return messages;
}

/**
 * Streamed tool calls arrive as fragments keyed by index; this joins them. Hand-written: the
 * `openai` package's stream accumulator is a test-only dependency here, and this is a few lines
 * (docs/decisions/0011-tool-call-joiner.md).
 */
export class ToolCallCollector {
  private readonly calls = new Map<number, { id?: string; name: string; arguments: string }>();

  add(deltas: ToolCallDelta[]) {
    for (const d of deltas) {
      const index = typeof d?.index === 'number' ? d.index : this.calls.size;
      const call = this.calls.get(index) ?? { name: '', arguments: '' };
      if (typeof d?.id === 'string') call.id = d.id;
      if (typeof d?.function?.name === 'string') call.name += d.function.name;
      if (typeof d?.function?.arguments === 'string') call.arguments += d.function.arguments;
      this.calls.set(index, call);
    }
  }

  result(): ChatToolCall[] {
    return [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, c]) => ({ id: c.id ?? `call_${randomBase62(24)}`, type: 'function' as const, function: { name: c.name, arguments: c.arguments } }));
  }
}

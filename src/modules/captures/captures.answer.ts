/**
 * What a capture keeps of a request and its answer, within a size limit: a body longer than
 * BODY_LIMIT_CHARS of JSON is kept as the first BODY_LIMIT_CHARS of its text and marked truncated.
 * A stream's answer is assembled as it passes, from the chunks the router already parsed: the
 * text, the tool calls and the usage (the first choice's; a stream asked for n choices keeps one).
 */
import type { Chunk } from '../metering';

export const BODY_LIMIT_CHARS = 1 << 20;

/** A body's JSON text as stored: itself, or when too long its cut text as a JSON string. */
export function capped(json: string): { json: string; truncated: boolean } {
  if (json.length <= BODY_LIMIT_CHARS) return { json, truncated: false };
  return { json: JSON.stringify(json.slice(0, BODY_LIMIT_CHARS)), truncated: true };
}

interface ToolCall {
  id?: string;
  type: string;
  function: { name: string; arguments: string };
}

const record = (v: unknown): Record<string, unknown> | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null);

/** A stream's answer, assembled chunk by chunk; never holds more than BODY_LIMIT_CHARS of text and arguments. */
export class StreamAnswer {
  private text = '';
  private readonly toolCalls: ToolCall[] = [];
  private usage: unknown = null;
  private finishReason: unknown = null;
  private size = 0;
  truncated = false;

  take(chunk: Chunk): void {
    if (chunk.usage) this.usage = chunk.usage;
    const choice = Array.isArray(chunk.choices) ? record(chunk.choices.find((c) => record(c)?.index === 0 || record(c)?.index === undefined)) : null;
    if (!choice) return;
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    const delta = record(choice.delta);
    if (!delta) return;
    if (typeof delta.content === 'string' && this.room(delta.content.length)) this.text += delta.content;
    if (!Array.isArray(delta.tool_calls)) return;
    for (const raw of delta.tool_calls) {
      const call = record(raw);
      if (!call) continue;
      const at = typeof call.index === 'number' ? call.index : this.toolCalls.length;
      if (at < 0 || at > 127) continue;
      const fn = record(call.function) ?? {};
      const known = this.toolCalls[at] ?? { type: 'function', function: { name: '', arguments: '' } };
      this.toolCalls[at] = known;
      if (typeof call.id === 'string') known.id = call.id;
      if (typeof fn.name === 'string' && this.room(fn.name.length)) known.function.name += fn.name;
      if (typeof fn.arguments === 'string' && this.room(fn.arguments.length)) known.function.arguments += fn.arguments;
    }
  }

  private room(chars: number): boolean {
    if (this.size + chars > BODY_LIMIT_CHARS) {
      this.truncated = true;
      return false;
    }
    this.size += chars;
    return true;
  }

  /** The assembled answer: {text, tool_calls, usage, finish_reason}. */
  result() {
    return { text: this.text, tool_calls: this.toolCalls.filter(Boolean), usage: this.usage, finish_reason: this.finishReason };
  }
}

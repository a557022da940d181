/**
 * Metering: what a request used. Upstream usage wins when it is valid; otherwise tokens are
 * counted (router.tokens.ts). A stream meter follows a stream chunk by chunk: it keeps what was
 * delivered, holds back the upstream's usage-only chunk (the client gets it last, with the cost
 * added) and answers the counts when the stream ends, however it ends.
 */
import { toMajor } from '../../platform/money';
import { countCompletionTokens, countPromptTokens } from './router.tokens';
import type { Chunk } from './router.upstream';

export interface UsageCounts {
  prompt: number;
  completion: number;
  /** True when the counts come from our tokenizer, not the upstream. */
  counted: boolean;
}

/** How a stream ended: the upstream finished, the client went away, or the upstream broke. */
export type StreamOutcome = 'done' | 'client' | 'upstream';

export function validUsage(u: unknown): u is { prompt_tokens: number; completion_tokens: number } {
  const x = u as { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
  return !!x && Number.isInteger(x.prompt_tokens) && Number.isInteger(x.completion_tokens) && (x.prompt_tokens as number) >= 0 && (x.completion_tokens as number) >= 0;
}

/** Text and tool-call text of a completion message or a chunk's deltas. */
export function outputText(parts: Array<{ content?: unknown; tool_calls?: unknown } | undefined>): { text: string; tools: string } {
  let text = '';
  let tools = '';
  for (const p of parts) {
    if (!p) continue;
    if (typeof p.content === 'string') text += p.content;
    if (Array.isArray(p.tool_calls))
      for (const c of p.tool_calls as Array<{ function?: { name?: unknown; arguments?: unknown } }>) {
        if (typeof c.function?.name === 'string') tools += c.function.name;
        if (typeof c.function?.arguments === 'string') tools += c.function.arguments;
      }
  }
  return { text, tools };
}

export function deltasOf(chunk: Chunk) {
  return ((chunk.choices as Array<{ delta?: { content?: unknown; tool_calls?: unknown } }>) ?? []).map((c) => c.delta);
}

/** Counts of a JSON completion: its usage, or counted from the request and the answer. */
export async function completionCounts(body: Record<string, unknown>, response: Chunk): Promise<UsageCounts> {
  if (validUsage(response.usage)) return { prompt: response.usage.prompt_tokens, completion: response.usage.completion_tokens, counted: false };
  const out = outputText(((response.choices as Array<{ message?: { content?: unknown; tool_calls?: unknown } }>) ?? []).map((c) => c.message));
  return { prompt: await countPromptTokens(body), completion: await countCompletionTokens(out.text, out.tools), counted: true };
}

/** `countPrompt` counts the request's prompt tokens: asked only when the upstream reports none. */
export function createStreamMeter(head: Chunk[], countPrompt: () => Promise<number>) {
  let text = '';
  let tools = '';
  let upstreamUsage: unknown = null;
  let usageChunk: Chunk | null = null;
  let template: Chunk = head[0]!;

  return {
    /** The chunk to pass on, or null for the upstream's usage-only chunk (held back). */
    take(chunk: Chunk): Chunk | null {
      template = chunk;
      if (chunk.usage) upstreamUsage = chunk.usage;
      const choices = chunk.choices;
      if (chunk.usage && (!Array.isArray(choices) || choices.length === 0)) {
        usageChunk = chunk;
        return null;
      }
      const out = outputText(deltasOf(chunk));
      text += out.text;
      tools += out.tools;
      return chunk;
    },
    /** Billed for what was delivered: nothing when no token reached the client. */
    billable: (outcome: StreamOutcome) => outcome === 'done' || text !== '' || tools !== '',
    async counts(outcome: StreamOutcome): Promise<UsageCounts> {
      if (outcome === 'done' && validUsage(upstreamUsage)) return { prompt: upstreamUsage.prompt_tokens, completion: upstreamUsage.completion_tokens, counted: false };
      const reportedPrompt = validUsage(upstreamUsage) ? upstreamUsage.prompt_tokens : null;
      return { prompt: reportedPrompt ?? (await countPrompt()), completion: await countCompletionTokens(text, tools), counted: true };
    },
    /** The chunk that ends the stream: the upstream's usage chunk (or one like it) with counts and cost. */
    finalChunk(outcome: StreamOutcome, counts: UsageCounts, costMicros: bigint, model: string): Chunk {
      const base = usageChunk ?? { id: template.id, object: 'chat.completion.chunk', created: template.created, model: template.model ?? model, choices: [] };
      const reported = outcome === 'done' && validUsage(upstreamUsage) ? (upstreamUsage as Record<string, unknown>) : {};
      return { ...base, usage: { ...reported, prompt_tokens: counts.prompt, completion_tokens: counts.completion, total_tokens: counts.prompt + counts.completion, cost: toMajor(costMicros) } };
    },
  };
}

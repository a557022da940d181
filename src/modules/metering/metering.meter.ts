/**
 * Metering: what a request used. Upstream usage wins when it is valid; otherwise tokens are
 * counted (metering.tokens.ts), of every kind of generated text: content, reasoning, refusals, tool
 * and function calls. A stream meter follows a stream chunk by chunk: it keeps what was
 * delivered, holds back the upstream's usage-only chunk (the client gets it last, with the cost
 * added) and answers the counts when the stream ends, however it ends.
 */
import { toMajor } from '../../platform/money';
import { countPromptTokens, countTexts } from './metering.tokens';

/** One parsed chat completion, or one chunk of a stream, as the upstream sent it. */
export type Chunk = Record<string, unknown>;

export interface UsageCounts {
  prompt: number;
  completion: number;
  /** Prompt tokens the upstream served from its cache (within prompt). */
  cached: number;
  /** Reasoning tokens (within completion). */
  reasoning: number;
  /** True when the counts come from our tokenizer, not the upstream. */
  counted: boolean;
}

/** How a stream ended: the upstream finished, the client went away, or the upstream broke. */
export type StreamOutcome = 'done' | 'client' | 'upstream';

export function validUsage(u: unknown): u is { prompt_tokens: number; completion_tokens: number } {
  const x = u as { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
  return !!x && Number.isInteger(x.prompt_tokens) && Number.isInteger(x.completion_tokens) && (x.prompt_tokens as number) >= 0 && (x.completion_tokens as number) >= 0;
}

/** A count within `total` read off an upstream usage object, 0 when absent or not a count. */
function within(total: number, ...values: unknown[]): number {
  const v = values.find((x) => Number.isInteger(x) && (x as number) >= 0) as number | undefined;
  return v === undefined ? 0 : Math.min(v, total);
}

/**
 * The counts of a valid upstream usage object: cached prompt tokens from
 * `prompt_tokens_details.cached_tokens` (OpenAI, vLLM) or `cache_read_input_tokens` (Anthropic's
 * name, as OpenAI-compatible proxies of it pass it on), reasoning from
 * `completion_tokens_details.reasoning_tokens`.
 */
export function reportedCounts(u: { prompt_tokens: number; completion_tokens: number }): UsageCounts {
  const x = u as { prompt_tokens_details?: { cached_tokens?: unknown } | null; cache_read_input_tokens?: unknown; completion_tokens_details?: { reasoning_tokens?: unknown } | null };
  return {
    prompt: u.prompt_tokens,
    completion: u.completion_tokens,
    cached: within(u.prompt_tokens, x.prompt_tokens_details?.cached_tokens, x.cache_read_input_tokens),
    reasoning: within(u.completion_tokens, x.completion_tokens_details?.reasoning_tokens),
    counted: false,
  };
}

/**
 * A completion message or a stream delta: every field generated text comes in. Reasoning is
 * `reasoning_content` (DeepSeek, vLLM) or `reasoning` (newer vLLM, OpenRouter); `function_call` is
 * the legacy single call.
 */
interface GeneratedFields {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  refusal?: unknown;
  tool_calls?: unknown;
  function_call?: unknown;
}

/** Generated text by kind (each kind's pieces joined, and counted as one text): what a completion bills. */
export interface Generated {
  content: string;
  reasoning: string;
  refusal: string;
  /** Tool call and legacy function_call names and arguments. */
  calls: string;
}

const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v !== '';

/** True when a delta (or message) carries generated text or a call: a token reached whoever reads it. */
export function hasOutput(part: GeneratedFields | undefined): boolean {
  if (!part) return false;
  return nonEmpty(part.content) || nonEmpty(part.reasoning_content) || nonEmpty(part.reasoning) || nonEmpty(part.refusal) || !!part.tool_calls || !!part.function_call;
}

function callText(call: unknown): string {
  const fn = call as { name?: unknown; arguments?: unknown } | null | undefined;
  return (typeof fn?.name === 'string' ? fn.name : '') + (typeof fn?.arguments === 'string' ? fn.arguments : '');
}

/** Adds the generated text of messages or deltas to `into`. */
export function addGenerated(into: Generated, parts: Array<GeneratedFields | undefined>): Generated {
  for (const p of parts) {
    if (!p) continue;
    if (typeof p.content === 'string') into.content += p.content;
    if (typeof p.reasoning_content === 'string') into.reasoning += p.reasoning_content;
    if (typeof p.reasoning === 'string') into.reasoning += p.reasoning;
    if (typeof p.refusal === 'string') into.refusal += p.refusal;
    if (Array.isArray(p.tool_calls)) for (const c of p.tool_calls as Array<{ function?: unknown }>) into.calls += callText(c?.function);
    if (p.function_call) into.calls += callText(p.function_call);
  }
  return into;
}

export const noneGenerated = (): Generated => ({ content: '', reasoning: '', refusal: '', calls: '' });

/** Completion tokens of generated text: each kind counted (metering.tokens.ts). */
export const countGenerated = (g: Generated) => countTexts([g.content, g.reasoning, g.refusal, g.calls]);

export function deltasOf(chunk: Chunk): Array<GeneratedFields | undefined> {
  return ((chunk.choices as Array<{ delta?: GeneratedFields }>) ?? []).map((c) => c.delta);
}

/** Counts of a JSON completion: its usage, or counted from the request and the answer. */
export async function completionCounts(body: Record<string, unknown>, response: Chunk): Promise<UsageCounts> {
  if (validUsage(response.usage)) return reportedCounts(response.usage);
  const out = addGenerated(noneGenerated(), ((response.choices as Array<{ message?: GeneratedFields }>) ?? []).map((c) => c.message));
  return { prompt: await countPromptTokens(body), completion: await countGenerated(out), cached: 0, reasoning: await countTexts([out.reasoning]), counted: true };
}

/** `countPrompt` counts the request's prompt tokens: asked only when the upstream reports none. */
export function createStreamMeter(head: Chunk[], countPrompt: () => Promise<number>) {
  const delivered = noneGenerated();
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
      addGenerated(delivered, deltasOf(chunk));
      return chunk;
    },
    /** Billed for what was delivered, reasoning included: nothing when no token reached the client. */
    billable: (outcome: StreamOutcome) => outcome === 'done' || Object.values(delivered).some((t) => t !== ''),
    async counts(outcome: StreamOutcome): Promise<UsageCounts> {
      if (outcome === 'done' && validUsage(upstreamUsage)) return reportedCounts(upstreamUsage);
      const reported = validUsage(upstreamUsage) ? reportedCounts(upstreamUsage) : null;
      return {
        prompt: reported?.prompt ?? (await countPrompt()),
        completion: await countGenerated(delivered),
        cached: reported?.cached ?? 0,
        reasoning: await countTexts([delivered.reasoning]),
        counted: true,
      };
    },
    /** The chunk that ends the stream: the upstream's usage chunk (or one like it) with counts and cost. */
    finalChunk(outcome: StreamOutcome, counts: UsageCounts, costMicros: bigint, model: string): Chunk {
      const base = usageChunk ?? { id: template.id, object: 'chat.completion.chunk', created: template.created, model: template.model ?? model, choices: [] };
      const reported = outcome === 'done' && validUsage(upstreamUsage) ? (upstreamUsage as Record<string, unknown>) : {};
      return { ...base, usage: { ...reported, prompt_tokens: counts.prompt, completion_tokens: counts.completion, total_tokens: counts.prompt + counts.completion, cost: toMajor(costMicros) } };
    },
  };
}

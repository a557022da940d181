/**
 * Metering of Anthropic Messages API answers (backends of format `anthropic`). Anthropic's
 * `input_tokens` leaves out the prompt tokens written to and read from its cache, which it reports
 * apart (`cache_creation_input_tokens`, `cache_read_input_tokens`); an OpenAI `prompt_tokens`
 * includes them. So the prompt billed is the sum of the three, of which the cache reads are the
 * cached tokens (billed at the cached input price) and the cache writes cost the input price: no
 * token is billed twice. A stream's `message_delta` usage is cumulative (the totals so far), so the
 * last value of each field is the count, never a sum.
 */
import { type Chunk, type Generated, type StreamOutcome, type UsageCounts, countGenerated, noneGenerated } from './metering.meter';
import { countTexts } from './metering.tokens';

type Json = Record<string, unknown>;

const count = (v: unknown): number | null => (Number.isInteger(v) && (v as number) >= 0 ? (v as number) : null);

/** Anthropic usage fields merged from a message_start's and later message_deltas' usage (each later value replaces the earlier). */
export function mergeMessageUsage(into: Json, usage: unknown): Json {
  if (usage && typeof usage === 'object') for (const [k, v] of Object.entries(usage as Json)) if (v !== null && v !== undefined) into[k] = v;
  return into;
}

/** The counts of an Anthropic usage object, or null when it lacks input_tokens or output_tokens. */
export function messageUsageCounts(usage: unknown): UsageCounts | null {
  const u = (usage ?? {}) as Json;
  const input = count(u.input_tokens);
  const output = count(u.output_tokens);
  if (input === null || output === null) return null;
  const written = count(u.cache_creation_input_tokens) ?? 0;
  const read = count(u.cache_read_input_tokens) ?? 0;
  return { prompt: input + written + read, completion: output, cached: read, reasoning: 0, counted: false };
}

/** The generated text of a message's content blocks (text, thinking, tool calls): what a completion bills when no usage says. */
export function messageGenerated(content: unknown): Generated {
  const g = noneGenerated();
  for (const block of Array.isArray(content) ? (content as Json[]) : []) {
    if (block?.type === 'text' && typeof block.text === 'string') g.content += block.text;
    else if (block?.type === 'thinking' && typeof block.thinking === 'string') g.reasoning += block.thinking;
    else if (block?.type === 'tool_use') g.calls += String(block.name ?? '') + JSON.stringify(block.input ?? {});
  }
  return g;
}

/** Counts of a JSON message: its usage, or counted (`countPrompt` the request's prompt). */
export async function messageCounts(message: Chunk, countPrompt: () => Promise<number>): Promise<UsageCounts> {
  const reported = messageUsageCounts(message.usage);
  if (reported) return reported;
  const out = messageGenerated(message.content);
  return { prompt: await countPrompt(), completion: await countGenerated(out), cached: 0, reasoning: await countTexts([out.reasoning]), counted: true };
}

/**
 * Follows a Messages API stream event by event: the usage reported so far (message_start, then
 * the cumulative message_delta), and what was delivered, for a stream cut short.
 */
export function createMessagesMeter(countPrompt: () => Promise<number>) {
  const delivered = noneGenerated();
  const usage: Json = {};
  let stopped = false;

  return {
    take(event: string, data: Chunk) {
      if (event === 'message_start') mergeMessageUsage(usage, (data.message as Json | undefined)?.usage);
      else if (event === 'message_delta') mergeMessageUsage(usage, data.usage);
      else if (event === 'message_stop') stopped = true;
      else if (event === 'content_block_start') {
        const block = data.content_block as Json | undefined;
        if (block?.type === 'tool_use' && typeof block.name === 'string') delivered.calls += block.name;
      } else if (event === 'content_block_delta') {
        const delta = (data.delta ?? {}) as Json;
        if (typeof delta.text === 'string') delivered.content += delta.text;
        else if (typeof delta.thinking === 'string') delivered.reasoning += delta.thinking;
        else if (typeof delta.partial_json === 'string') delivered.calls += delta.partial_json;
      }
    },
    /** The stream reached message_stop. */
    get complete() {
      return stopped;
    },
    /** The usage reported so far, merged (Anthropic's field names). */
    usage: () => ({ ...usage }),
    billable: (outcome: StreamOutcome) => outcome === 'done' || Object.values(delivered).some((t) => t !== ''),
    async counts(outcome: StreamOutcome): Promise<UsageCounts> {
      const reported = messageUsageCounts(usage);
      if (outcome === 'done' && reported) return reported;
      // Cut short: the prompt as reported at the start, the completion as delivered.
      const input = count(usage.input_tokens);
      return {
        prompt: input === null ? await countPrompt() : input + (count(usage.cache_creation_input_tokens) ?? 0) + (count(usage.cache_read_input_tokens) ?? 0),
        completion: await countGenerated(delivered),
        cached: count(usage.cache_read_input_tokens) ?? 0,
        reasoning: await countTexts([delivered.reasoning]),
        counted: true,
      };
    },
  };
}

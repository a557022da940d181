/**
 * A Claude Code-style session, run as its own process the way Claude Code runs: the official SDK
 * constructed with no options, so it reads ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN (or
 * ANTHROPIC_API_KEY) from the environment, exactly the variables the README tells a user to set.
 *
 *   bun tests/support/anthropic-env-session.ts <model>
 *
 * Like Claude Code it calls the beta Messages API (`client.beta.messages`, with an
 * `anthropic-beta` flag). Turn 1 streams with thinking and a tool; turn 2 sends the assistant's content back as it came
 * (thinking blocks with their signatures) with the tool's result, and gets the final text. Prints
 * one JSON line: {turn1, turn2} (each the final message), or {error: {status, body}} on a failure.
 */
import Anthropic from '@anthropic-ai/sdk';

const model = process.argv[2]!;
const client = new Anthropic({ maxRetries: 0 });
const tools = [{ name: 'read_file', description: 'read a file', input_schema: { type: 'object' as const, properties: { path: { type: 'string' } }, required: ['path'] } }];
const asked = { model, max_tokens: 4096, thinking: { type: 'enabled' as const, budget_tokens: 2048 }, tools, system: 'You are a coding agent.', betas: ['interleaved-thinking-2025-05-14'] };

try {
  const first: Anthropic.Beta.BetaMessageParam[] = [{ role: 'user', content: 'What is in README.md?' }];
  const turn1 = await client.beta.messages.stream({ ...asked, messages: first }).finalMessage();
  const call = turn1.content.find((b) => b.type === 'tool_use');
  if (!call) throw new Error(`turn 1 called no tool: ${JSON.stringify(turn1.content)}`);
  const turn2 = await client.beta.messages
    .stream({
      ...asked,
      messages: [...first, { role: 'assistant', content: turn1.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '# cpd\nA compute platform.' }] }],
    })
    .finalMessage();
  console.log(JSON.stringify({ turn1, turn2 }));
} catch (err) {
  const e = err as { status?: number; error?: unknown; message?: string };
  console.log(JSON.stringify({ error: { status: e.status ?? null, body: e.error ?? e.message } }));
}

/**
 * Request schemas of the Agents API. Bodies follow the OpenAI Agents beta except the events body, which is cpd's own;
 * unknown fields (the official client sends `environment`, `reasoning`, …) are dropped, not refused.
 * Metadata limits (16 pairs, 64/512 characters) are checked in the service for a clear message.
 */
import { t } from 'elysia';

const Metadata = t.Record(t.String(), t.String());
// Kept fields are `additionalProperties: t.Unknown()`: the app's TypeBox normalization drops them under `true`.
const Tool = t.Object({ type: t.String({ minLength: 1 }) }, { additionalProperties: t.Unknown() });

export const AgentCreateBody = t.Object({
  model: t.String({ minLength: 1, maxLength: 256 }),
  name: t.Optional(t.Nullable(t.String({ maxLength: 256 }))),
  instructions: t.Optional(t.Nullable(t.String({ maxLength: 256_000 }))),
  tools: t.Optional(t.Nullable(t.Array(Tool, { maxItems: 128 }))),
  metadata: t.Optional(t.Nullable(Metadata)),
}, { examples: [{ model: 'llama-3.1-8b', name: 'helper', instructions: 'Answer in one sentence.' }] });

export const AgentUpdateBody = t.Partial(AgentCreateBody);

export const SessionCreateBody = t.Object(
  {
    agent_id: t.String({ minLength: 1 }),
    metadata: t.Optional(t.Nullable(Metadata)),
  },
  { examples: [{ agent_id: 'agt_…' }] },
);

export const SessionUpdateBody = t.Object({ metadata: t.Optional(t.Nullable(Metadata)) });

/** A tool result answers one pending call; `tool_call_id`/`content` (chat-completions spelling) also work. */
const ToolCallResult = t.Object({
  call_id: t.Optional(t.String({ minLength: 1 })),
  tool_call_id: t.Optional(t.String({ minLength: 1 })),
  output: t.Optional(t.Unknown()),
  content: t.Optional(t.Unknown()),
});

/** An event: role user (content required) or tool (tool_call_results required). */
export const EventBody = t.Object({
  role: t.Union([t.Literal('user'), t.Literal('tool')], { error: 'role must be user or tool' }),
  content: t.Optional(t.Nullable(t.String({ maxLength: 1_000_000 }))),
  tool_calls: t.Optional(t.Array(t.Object({}, { additionalProperties: t.Unknown() }), { maxItems: 128 })),
  tool_call_results: t.Optional(t.Array(ToolCallResult, { maxItems: 128 })),
}, { examples: [{ role: 'user', content: 'Weather in Paris?' }] });

export const ListQuery = t.Object({
  limit: t.Optional(t.Numeric({ minimum: 1, maximum: 100, multipleOf: 1 })),
  after: t.Optional(t.String({ minLength: 1 })),
  order: t.Optional(t.Union([t.Literal('asc'), t.Literal('desc')])),
});

export const SessionListQuery = t.Composite([ListQuery, t.Object({ agent_id: t.Optional(t.String()) })]);

export const IdParams = t.Object({ id: t.String() });
export const TurnParams = t.Object({ id: t.String(), turnId: t.String() });

export type AgentCreateInput = typeof AgentCreateBody.static;
export type AgentUpdateInput = typeof AgentUpdateBody.static;
export type SessionCreateInput = typeof SessionCreateBody.static;
export type SessionUpdateInput = typeof SessionUpdateBody.static;
export type EventInput = typeof EventBody.static;
export type ListInput = typeof ListQuery.static;

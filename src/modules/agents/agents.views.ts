/** Rows → the JSON shapes of the OpenAI Agents beta, with ISO 8601 timestamps (cpd's format everywhere) instead of Unix seconds. */
import type { agentEvents, agentItems, agents, agentSessions, agentTurns } from './agents.tables';

type Row<T extends { $inferSelect: unknown }> = T['$inferSelect'];

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const usage = (r: { inputTokens: number; outputTokens: number }) => ({
  input_tokens: r.inputTokens,
  output_tokens: r.outputTokens,
  total_tokens: r.inputTokens + r.outputTokens,
});

export const agentView = (r: Row<typeof agents>) => ({
  id: r.id,
  object: 'agent' as const,
  name: r.name,
  model: r.model,
  instructions: r.instructions,
  tools: r.tools,
  metadata: r.metadata,
  created_at: iso(r.createdAt),
  updated_at: iso(r.updatedAt),
});

export const sessionView = (r: Row<typeof agentSessions>) => ({
  id: r.id,
  object: 'agent.session' as const,
  agent: r.agent,
  status: r.status,
  error: r.error,
  required_actions: r.requiredActions,
  usage: usage(r),
  metadata: r.metadata,
  created_at: iso(r.createdAt),
  last_active_at: iso(r.lastActiveAt),
});

export const eventView = (r: Row<typeof agentEvents>) => ({
  id: r.id,
  session_id: r.sessionId,
  type: r.type,
  created_at: iso(r.createdAt),
});

export const turnView = (r: Row<typeof agentTurns>) => ({
  id: r.id,
  object: 'agent.session.turn' as const,
  session_id: r.sessionId,
  agent_id: r.agentId,
  status: r.status,
  error: r.error,
  usage: usage(r),
  created_at: iso(r.createdAt),
  started_at: iso(r.createdAt),
  completed_at: iso(r.completedAt),
});

export function itemView(r: Row<typeof agentItems>) {
  const common = { id: r.id, turn_id: r.turnId, status: 'completed' as const, created_at: iso(r.createdAt) };
  switch (r.type) {
    case 'message':
      return {
        ...common,
        type: r.type,
        role: r.role,
        content: [{ type: r.role === 'user' ? 'input_text' : 'output_text', text: r.content ?? '' }],
      };
    case 'function_call':
      return { ...common, type: r.type, call_id: r.callId, name: r.name, arguments: r.arguments };
    case 'function_call_output':
      return { ...common, type: r.type, call_id: r.callId, output: r.output, error: null };
  }
}

/** The list envelope of every Agents API list: {object: list, data, has_more, first_id, last_id}. */
export function listView<R, V extends { id: string }>(rows: R[], limit: number, view: (r: R) => V) {
  const data = rows.slice(0, limit).map(view);
  return { object: 'list' as const, data, has_more: rows.length > limit, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
}

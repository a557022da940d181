/**
 * Agents API tables. Every row carries a `seq` identity column: list cursors and the conversation
 * history order by it (ids are time-ordered only to the millisecond).
 * `owner_id` is the account whose bfvk- key created the row, `anonymous:<client address>` for an
 * anonymous caller in open mode, or null for the AGENT_CLOUD_API_KEY holder's workspace; every
 * read filters by it.
 */
import { sql } from 'drizzle-orm';
import { bigint, index, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
const seq = () => bigint('seq', { mode: 'number' }).generatedAlwaysAsIdentity().notNull();

export type AgentTool = Record<string, unknown> & { type: string };
export type Metadata = Record<string, string>;

/** What a session keeps of its agent: sessions run on the agent as it was when they were created. */
export interface AgentSnapshot {
  id: string;
  name: string | null;
  model: string;
  instructions: string | null;
  tools: AgentTool[];
}

/** A tool call waiting for its result (session.required_actions). */
export interface PendingToolCall {
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
  turn_id: string;
}

export const agents = pgTable(
  'agents',
  {
    id: text('id').primaryKey(),
    seq: seq(),
    ownerId: text('owner_id'),
    name: text('name'),
    model: text('model').notNull(),
    instructions: text('instructions'),
    tools: jsonb('tools').$type<AgentTool[]>().notNull(),
    metadata: jsonb('metadata').$type<Metadata>().notNull(),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [index('agents_owner_seq_idx').on(t.ownerId, t.seq)],
);

export const agentSessions = pgTable(
  'agent_sessions',
  {
    id: text('id').primaryKey(),
    seq: seq(),
    ownerId: text('owner_id'),
    agentId: text('agent_id').notNull(),
    agent: jsonb('agent').$type<AgentSnapshot>().notNull(),
    status: text('status').$type<SessionStatus>().notNull(),
    error: text('error'),
    requiredActions: jsonb('required_actions').$type<PendingToolCall[]>().notNull(),
    inputTokens: bigint('input_tokens', { mode: 'number' }).notNull().default(0),
    outputTokens: bigint('output_tokens', { mode: 'number' }).notNull().default(0),
    metadata: jsonb('metadata').$type<Metadata>().notNull(),
    createdAt: ts('created_at').notNull(),
    lastActiveAt: ts('last_active_at').notNull(),
  },
  (t) => [index('agent_sessions_owner_seq_idx').on(t.ownerId, t.seq), index('agent_sessions_agent_idx').on(t.agentId)],
);

export type SessionStatus = 'idle' | 'in_progress' | 'requires_action' | 'failed';
export type TurnStatus = 'in_progress' | 'completed' | 'failed' | 'cancelled';

export const agentEvents = pgTable(
  'agent_events',
  {
    id: text('id').primaryKey(),
    seq: seq(),
    sessionId: text('session_id')
      .notNull()
      .references(() => agentSessions.id, { onDelete: 'cascade' }),
    role: text('role').notNull(),
    type: text('type').notNull(),
    content: text('content'),
    toolCalls: jsonb('tool_calls').$type<unknown[]>(),
    toolCallResults: jsonb('tool_call_results').$type<unknown[]>(),
    turnId: text('turn_id'),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [index('agent_events_session_seq_idx').on(t.sessionId, t.seq)],
);

export const agentTurns = pgTable(
  'agent_turns',
  {
    id: text('id').primaryKey(),
    seq: seq(),
    sessionId: text('session_id')
      .notNull()
      .references(() => agentSessions.id, { onDelete: 'cascade' }),
    agentId: text('agent_id').notNull(),
    eventId: text('event_id').notNull(),
    status: text('status').$type<TurnStatus>().notNull(),
    error: text('error'),
    inputTokens: bigint('input_tokens', { mode: 'number' }).notNull().default(0),
    outputTokens: bigint('output_tokens', { mode: 'number' }).notNull().default(0),
    /** The account billed for the turn's model calls (null: anonymous, unbilled). */
    userId: text('user_id'),
    keyId: text('key_id'),
    createdAt: ts('created_at').notNull(),
    completedAt: ts('completed_at'),
  },
  (t) => [
    index('agent_turns_session_seq_idx').on(t.sessionId, t.seq),
    // The database itself refuses a second running turn in one session.
    uniqueIndex('agent_turns_one_running_key').on(t.sessionId).where(sql`status = 'in_progress'`),
  ],
);

export type ItemType = 'message' | 'function_call' | 'function_call_output';

export const agentItems = pgTable(
  'agent_items',
  {
    id: text('id').primaryKey(),
    seq: seq(),
    sessionId: text('session_id')
      .notNull()
      .references(() => agentSessions.id, { onDelete: 'cascade' }),
    turnId: text('turn_id').notNull(),
    type: text('type').$type<ItemType>().notNull(),
    role: text('role').$type<'user' | 'assistant'>(),
    content: text('content'),
    callId: text('call_id'),
    name: text('name'),
    arguments: text('arguments'),
    output: text('output'),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [index('agent_items_session_seq_idx').on(t.sessionId, t.seq)],
);

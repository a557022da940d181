/**
 * Agents and sessions: CRUD, the history reads (turns, items) and the list cursor. Events and the
 * turns they start live in agents.turns.ts. Every read is scoped to the principal's workspace;
 * a row of another workspace is the same 404 as a missing one.
 */
import { and, asc, desc, eq, gt, isNull, lt, type SQL } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { assertBodyDepth } from '../../platform/http/json-depth';
import { newId } from '../../platform/ids';
import type { AgentCreateInput, AgentUpdateInput, ListInput, SessionCreateInput, SessionUpdateInput } from './agents.schemas';
import { type AgentTool, agentItems, agents, agentSessions, agentTurns, type Metadata } from './agents.tables';
import { agentView, itemView, listView, sessionView, turnView } from './agents.views';

/** The account billed for model calls: the owner of the bfvk- key that was presented. */
export interface BilledCaller {
  userId: string;
  keyId: string | null;
}

/** Who is asking: its workspace (`ownerId`: an account, `anonymous:<address>` in open mode, null = the AGENT_CLOUD_API_KEY workspace) and whom to bill (null = nobody). */
export interface Principal {
  ownerId: string | null;
  caller: BilledCaller | null;
}

export const LIST_DEFAULT_LIMIT = 20;
const METADATA_MAX_PAIRS = 16;
const METADATA_MAX_KEY = 64;
const METADATA_MAX_VALUE = 512;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export function ownedBy(column: typeof agents.ownerId | typeof agentSessions.ownerId, ownerId: string | null): SQL {
  return ownerId === null ? isNull(column) : eq(column, ownerId);
}

function checkMetadata(metadata: Metadata | null | undefined): Metadata {
  const entries = Object.entries(metadata ?? {});
  if (entries.length > METADATA_MAX_PAIRS) throw new AppError('invalid', `metadata holds at most ${METADATA_MAX_PAIRS} pairs`);
  for (const [key, value] of entries) {
    if (key.length > METADATA_MAX_KEY) throw new AppError('invalid', `metadata keys are at most ${METADATA_MAX_KEY} characters`);
    if (value.length > METADATA_MAX_VALUE) throw new AppError('invalid', `metadata values are at most ${METADATA_MAX_VALUE} characters`);
  }
  return Object.fromEntries(entries);
}

/** The model is called through chat completions, so only function tools can be honoured. */
function checkTools(tools: AgentTool[] | null | undefined): AgentTool[] {
  for (const tool of tools ?? []) {
    if (tool.type !== 'function') throw new AppError('invalid', `tool type ${JSON.stringify(tool.type)} is not supported; use function tools`);
    if (!TOOL_NAME.test(String(functionOf(tool).name ?? '')))
      throw new AppError('invalid', 'a function tool needs a name of 1..64 letters, digits, _ or -');
  }
  return tools ?? [];
}

/** A function tool written flat (Agents beta) or nested under `function` (chat completions). */
export function functionOf(tool: AgentTool): { name?: unknown; description?: unknown; parameters?: unknown } {
  const nested = tool.function;
  return nested && typeof nested === 'object' ? (nested as Record<string, unknown>) : (tool as Record<string, unknown>);
}

type ListTable = typeof agents | typeof agentSessions | typeof agentTurns | typeof agentItems;

export function createAgentsCrud(ctx: AppContext) {
  const { db } = ctx.database;
  const now = () => ctx.clock.now();

  /** One page in `seq` order after the `after` id (which must belong to the same list). */
  async function page<T extends ListTable>(table: T, scope: SQL, q: ListInput): Promise<{ rows: T['$inferSelect'][]; limit: number }> {
    // The four tables share id and seq columns; one shape keeps drizzle's types simple here.
    const tbl = table as unknown as typeof agents;
    const limit = q.limit ?? LIST_DEFAULT_LIMIT;
    const ascending = q.order === 'asc';
    const where = [scope];
    if (q.after !== undefined) {
      const [cursor] = await db.select({ seq: tbl.seq }).from(tbl).where(and(scope, eq(tbl.id, q.after))).limit(1);
      if (!cursor) throw new AppError('invalid', 'after does not name an entry of this list');
      where.push(ascending ? gt(tbl.seq, cursor.seq) : lt(tbl.seq, cursor.seq));
    }
    const rows = await db
      .select()
      .from(tbl)
      .where(and(...where))
      .orderBy(ascending ? asc(tbl.seq) : desc(tbl.seq))
      .limit(limit + 1);
    return { rows: rows as T['$inferSelect'][], limit };
  }

  async function requireAgentRow(p: Principal, id: string) {
    const [row] = await db.select().from(agents).where(and(eq(agents.id, id), ownedBy(agents.ownerId, p.ownerId))).limit(1);
    if (!row) throw new AppError('not_found', 'agent not found');
    return row;
  }

  async function requireSessionRow(p: Principal, id: string, on: DbOrTx = db, forUpdate = false) {
    const query = on
      .select()
      .from(agentSessions)
      .where(and(eq(agentSessions.id, id), ownedBy(agentSessions.ownerId, p.ownerId)))
      .limit(1);
    const [row] = forUpdate ? await query.for('update') : await query;
    if (!row) throw new AppError('not_found', 'session not found');
    return row;
  }

  return {
    requireSessionRow,

    async createAgent(p: Principal, input: AgentCreateInput) {
      // Its tools go to the model with every turn (and into jsonb): nested as a gateway body may be, no deeper.
      assertBodyDepth(input);
      const at = now();
      const [row] = await db
        .insert(agents)
        .values({
          id: newId('agent'),
          ownerId: p.ownerId,
          name: input.name ?? null,
          model: input.model,
          instructions: input.instructions ?? null,
          tools: checkTools(input.tools),
          metadata: checkMetadata(input.metadata),
          createdAt: at,
          updatedAt: at,
        })
        .returning();
      return agentView(row!);
    },

    getAgent: async (p: Principal, id: string) => agentView(await requireAgentRow(p, id)),

    /** Omitted fields stay; null clears name, instructions, tools and metadata. */
    async updateAgent(p: Principal, id: string, input: AgentUpdateInput) {
      assertBodyDepth(input);
      await requireAgentRow(p, id);
      const patch: Partial<typeof agents.$inferInsert> = { updatedAt: now() };
      if (input.model !== undefined) patch.model = input.model;
      if (input.name !== undefined) patch.name = input.name;
      if (input.instructions !== undefined) patch.instructions = input.instructions;
      if (input.tools !== undefined) patch.tools = checkTools(input.tools);
      if (input.metadata !== undefined) patch.metadata = checkMetadata(input.metadata);
      const [row] = await db.update(agents).set(patch).where(eq(agents.id, id)).returning();
      if (!row) throw new AppError('not_found', 'agent not found');
      return agentView(row);
    },

    /** Sessions keep running on their snapshot of the agent. */
    async deleteAgent(p: Principal, id: string) {
      const deleted = await db
        .delete(agents)
        .where(and(eq(agents.id, id), ownedBy(agents.ownerId, p.ownerId)))
        .returning({ id: agents.id });
      if (deleted.length === 0) throw new AppError('not_found', 'agent not found');
      return { id, object: 'agent.deleted' as const, deleted: true };
    },

    async listAgents(p: Principal, q: ListInput) {
      const { rows, limit } = await page(agents, ownedBy(agents.ownerId, p.ownerId), q);
      return listView(rows, limit, agentView);
    },

    async createSession(p: Principal, input: SessionCreateInput) {
      const agent = await requireAgentRow(p, input.agent_id);
      const metadata = checkMetadata(input.metadata);
      const at = now();
      const [row] = await db
        .insert(agentSessions)
        .values({
          id: newId('sess'),
          ownerId: p.ownerId,
          agentId: agent.id,
          agent: { id: agent.id, name: agent.name, model: agent.model, instructions: agent.instructions, tools: agent.tools },
          status: 'idle',
          error: null,
          requiredActions: [],
          metadata,
          createdAt: at,
          lastActiveAt: at,
        })
        .returning();
      return sessionView(row!);
    },

    getSession: async (p: Principal, id: string) => sessionView(await requireSessionRow(p, id)),

    async updateSession(p: Principal, id: string, input: SessionUpdateInput) {
      const current = await requireSessionRow(p, id);
      if (input.metadata === undefined) return sessionView(current);
      const [row] = await db
        .update(agentSessions)
        .set({ metadata: checkMetadata(input.metadata) })
        .where(eq(agentSessions.id, id))
        .returning();
      if (!row) throw new AppError('not_found', 'session not found');
      return sessionView(row);
    },

    async deleteSession(p: Principal, id: string) {
      const deleted = await db
        .delete(agentSessions)
        .where(and(eq(agentSessions.id, id), ownedBy(agentSessions.ownerId, p.ownerId)))
        .returning({ id: agentSessions.id });
      if (deleted.length === 0) throw new AppError('not_found', 'session not found');
      return { id, object: 'agent.session.deleted' as const, deleted: true };
    },

    async listSessions(p: Principal, q: ListInput & { agent_id?: string }) {
      const owner = ownedBy(agentSessions.ownerId, p.ownerId);
      const scope = q.agent_id === undefined ? owner : and(owner, eq(agentSessions.agentId, q.agent_id))!;
      const { rows, limit } = await page(agentSessions, scope, q);
      return listView(rows, limit, sessionView);
    },

    async listTurns(p: Principal, sessionId: string, q: ListInput) {
      await requireSessionRow(p, sessionId);
      const { rows, limit } = await page(agentTurns, eq(agentTurns.sessionId, sessionId), q);
      return listView(rows, limit, turnView);
    },

    async getTurn(p: Principal, sessionId: string, turnId: string) {
      await requireSessionRow(p, sessionId);
      const [row] = await db
        .select()
        .from(agentTurns)
        .where(and(eq(agentTurns.sessionId, sessionId), eq(agentTurns.id, turnId)))
        .limit(1);
      if (!row) throw new AppError('not_found', 'turn not found');
      return turnView(row);
    },

    async listItems(p: Principal, sessionId: string, q: ListInput) {
      await requireSessionRow(p, sessionId);
      const { rows, limit } = await page(agentItems, eq(agentItems.sessionId, sessionId), q);
      return listView(rows, limit, itemView);
    },
  };
}

export type AgentsCrud = ReturnType<typeof createAgentsCrud>;

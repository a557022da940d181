/**
 * Events and turns. An event is accepted in one transaction holding the session row lock, so two
 * concurrent events never both start a turn (a second one is 409) and a refused event leaves
 * nothing behind. A turn then runs detached from the HTTP request: it streams the model's answer
 * through the router, persists the items and emits frames to whoever listens. A client that
 * disconnects only stops listening; the turn completes and is persisted (docs/agents.md).
 */
import { and, asc, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { type DbOrTx, isDatabaseUnreachable, isTransient } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { assertBodyDepth } from '../../platform/http/json-depth';
import { newId } from '../../platform/ids';
import { type ChatModels, type ChatToolCall, chatRequest, readChunk, ToolCallCollector } from './agents.chat';
import type { EventInput } from './agents.schemas';
import type { AgentsCrud, BilledCaller, Principal } from './agents.service';
import { type AgentSnapshot, agentEvents, agentItems, agentSessions, agentTurns, type PendingToolCall } from './agents.tables';
import { eventView } from './agents.views';

/** A turn still marked running after this long was lost with its process; a new event may replace it. */
const STALE_TURN_MS = 15 * 60_000;

export type Frame =
  | { event: 'delta'; data: { content: string } }
  | { event: 'tool_calls'; data: { tool_calls: ChatToolCall[] } }
  | { event: 'error'; data: { error: string } }
  | { event: 'turn.completed'; data: Record<string, never> };

interface TurnStart {
  turnId: string;
  sessionId: string;
  agent: AgentSnapshot;
  caller: BilledCaller | null;
}

interface Accepted {
  event: ReturnType<typeof eventView>;
  turn: TurnStart | null;
  /** Tool calls still waiting for a result after this event. */
  pending: PendingToolCall[];
}

interface ToolResult {
  callId: string;
  output: string;
}

const asToolCall = (p: PendingToolCall): ChatToolCall => ({ id: p.call_id, type: 'function', function: { name: p.name, arguments: p.arguments } });

function toolResultsOf(input: EventInput): ToolResult[] {
  const results = input.tool_call_results ?? [];
  if (results.length === 0) throw new AppError('invalid', 'a tool event needs tool_call_results');
  const seen = new Set<string>();
  return results.map((r) => {
    const callId = r.call_id ?? r.tool_call_id;
    if (!callId) throw new AppError('invalid', 'each tool call result needs call_id');
    if (seen.has(callId)) throw new AppError('invalid', `tool call ${callId} is answered twice`);
    seen.add(callId);
    const output = r.output ?? r.content ?? '';
    return { callId, output: typeof output === 'string' ? output : JSON.stringify(output) };
  });
}

export function createTurns(ctx: AppContext, crud: AgentsCrud, models: ChatModels) {
  const { db } = ctx.database;
  const now = () => ctx.clock.now();
  /** Turns running in this process, by session: aborted when the session is deleted or at shutdown. */
  const running = new Map<string, { abort: AbortController; done: Promise<void> }>();

  async function insertTurn(tx: DbOrTx, session: { id: string; agent: AgentSnapshot }, eventId: string, caller: BilledCaller | null) {
    const turnId = newId('turn');
    await tx.insert(agentTurns).values({
      id: turnId,
      sessionId: session.id,
      agentId: session.agent.id,
      eventId,
      status: 'in_progress',
      userId: caller?.userId ?? null,
      keyId: caller?.keyId ?? null,
      createdAt: now(),
    });
    return { turnId, sessionId: session.id, agent: session.agent, caller };
  }

  /** Marks a running turn that outlived STALE_TURN_MS as failed; returns the session's effective status. */
  async function settleStaleTurn(tx: DbOrTx, session: typeof agentSessions.$inferSelect) {
    if (session.status !== 'in_progress') return session.status;
    const [turn] = await tx
      .select({ id: agentTurns.id, createdAt: agentTurns.createdAt })
      .from(agentTurns)
      .where(and(eq(agentTurns.sessionId, session.id), eq(agentTurns.status, 'in_progress')))
      .limit(1);
    if (turn && now().getTime() - turn.createdAt.getTime() < STALE_TURN_MS) return session.status;
    if (turn) await tx.update(agentTurns).set({ status: 'failed', error: 'turn interrupted', completedAt: now() }).where(eq(agentTurns.id, turn.id));
    return 'failed' as const;
  }

  async function accept(p: Principal, sessionId: string, input: EventInput): Promise<Accepted> {
    // Tool calls and results are stored (jsonb) and sent to the model: nested as a gateway body may be, no deeper.
    assertBodyDepth(input);
    const content = input.content ?? '';
    if (input.role === 'user' && content === '') throw new AppError('invalid', 'a user event needs content');
    const results = input.role === 'tool' ? toolResultsOf(input) : [];

    return db.transaction(async (tx) => {
      const session = await crud.requireSessionRow(p, sessionId, tx, true);
      const status = await settleStaleTurn(tx, session);
      const at = now();
      const eventId = newId('evt');
      let turn: TurnStart | null = null;
      let pending = session.requiredActions;

      if (input.role === 'user') {
        if (status === 'in_progress') throw new AppError('conflict', 'a turn is already running in this session');
        if (status === 'requires_action') throw new AppError('conflict', 'the session is waiting for tool call results');
        turn = await insertTurn(tx, session, eventId, p.caller);
        await tx.insert(agentItems).values({ id: newId('item'), sessionId, turnId: turn.turnId, type: 'message', role: 'user', content, createdAt: at });
      } else {
        if (status !== 'requires_action' || pending.length === 0) throw new AppError('conflict', 'no tool calls are pending in this session');
        const byId = new Map(pending.map((c) => [c.call_id, c]));
        const unknown = results.find((r) => !byId.has(r.callId));
        if (unknown) throw new AppError('invalid', `tool call ${unknown.callId} is not pending in this session`);
        await tx.insert(agentItems).values(
          results.map((r) => ({
            id: newId('item'),
            sessionId,
            turnId: byId.get(r.callId)!.turn_id,
            type: 'function_call_output' as const,
            callId: r.callId,
            output: r.output,
            createdAt: at,
          })),
        );
        const answered = new Set(results.map((r) => r.callId));
        pending = pending.filter((c) => !answered.has(c.call_id));
        if (pending.length === 0) turn = await insertTurn(tx, session, eventId, p.caller);
      }

      const [event] = await tx
        .insert(agentEvents)
        .values({
          id: eventId,
          sessionId,
          role: input.role,
          type: input.role === 'user' ? 'message' : 'tool_result',
          content: input.content ?? null,
          toolCalls: input.tool_calls ?? null,
          toolCallResults: input.tool_call_results ?? null,
          turnId: turn?.turnId ?? null,
          createdAt: at,
        })
        .returning();
      await tx
        .update(agentSessions)
        .set(turn ? { status: 'in_progress', error: null, requiredActions: [], lastActiveAt: at } : { requiredActions: pending, lastActiveAt: at })
        .where(eq(agentSessions.id, sessionId));
      return { event: eventView(event!), turn, pending };
    });
  }

  /** Writes a turn's outcome unless it is no longer running (cancelled, replaced, session deleted). */
  async function settle(
    turn: TurnStart,
    outcome:
      | { status: 'completed'; content: string; toolCalls: ChatToolCall[]; usage: { input: number; output: number } }
      | { status: 'failed' | 'cancelled'; error: string },
  ) {
    const at = now();
    await db.transaction(async (tx) => {
      const usage = outcome.status === 'completed' ? outcome.usage : { input: 0, output: 0 };
      const [still] = await tx
        .update(agentTurns)
        .set({
          status: outcome.status,
          error: outcome.status === 'completed' ? null : outcome.error,
          inputTokens: usage.input,
          outputTokens: usage.output,
          completedAt: at,
        })
        .where(and(eq(agentTurns.id, turn.turnId), eq(agentTurns.status, 'in_progress')))
        .returning({ id: agentTurns.id });
      if (!still) return;
      const sessionUsage = {
        inputTokens: sql`${agentSessions.inputTokens} + ${usage.input}`,
        outputTokens: sql`${agentSessions.outputTokens} + ${usage.output}`,
        lastActiveAt: at,
      };
      if (outcome.status !== 'completed') {
        await tx.update(agentSessions).set({ ...sessionUsage, status: 'failed', error: outcome.error }).where(eq(agentSessions.id, turn.sessionId));
        return;
      }
      const base = { sessionId: turn.sessionId, turnId: turn.turnId, createdAt: at };
      const items: Array<typeof agentItems.$inferInsert> = [];
      if (outcome.content) items.push({ ...base, id: newId('item'), type: 'message', role: 'assistant', content: outcome.content });
      for (const call of outcome.toolCalls)
        items.push({ ...base, id: newId('item'), type: 'function_call', callId: call.id, name: call.function.name, arguments: call.function.arguments });
      if (items.length > 0) await tx.insert(agentItems).values(items);
      const pending: PendingToolCall[] = outcome.toolCalls.map((c) => ({
        type: 'function_call',
        call_id: c.id,
        name: c.function.name,
        arguments: c.function.arguments,
        turn_id: turn.turnId,
      }));
      await tx
        .update(agentSessions)
        .set({ ...sessionUsage, status: pending.length > 0 ? 'requires_action' : 'idle', error: null, requiredActions: pending })
        .where(eq(agentSessions.id, turn.sessionId));
    });
  }

  /**
   * settle(), retried while the database is away (a restart, a failover): an outcome that is never
   * written leaves its session `in_progress`, refusing every event until the lost-turn timeout,
   * and a completed turn already billed would read as failed. settle() writes only while the turn
   * is still running, so a retry after a lost acknowledgement changes nothing. The stream's last
   * frames wait for it, as a gateway answer waits for its usage commit. Given up when the turn is
   * cancelled (shutdown): the lost-turn timeout covers that case.
   */
  async function settleDurably(turn: TurnStart, outcome: Parameters<typeof settle>[1], signal: AbortSignal) {
    for (let failures = 0; ; failures++) {
      try {
        return await settle(turn, outcome);
      } catch (err) {
        if (!isTransient(err) || signal.aborted) throw err;
        if (failures === 0) ctx.log.warn({ err, turn_id: turn.turnId }, 'agent turn outcome: database unavailable; retrying');
        await Bun.sleep(Math.min(2_000, 25 * 2 ** failures));
      }
    }
  }

  async function execute(turn: TurnStart, emit: (frame: Frame) => void, signal: AbortSignal) {
    try {
      const items = await db.select().from(agentItems).where(eq(agentItems.sessionId, turn.sessionId)).orderBy(asc(agentItems.seq));
      const calls = new ToolCallCollector();
      const usage = { input: 0, output: 0 };
      let content = '';
      for await (const chunk of models.streamChat({ caller: turn.caller, body: chatRequest(turn.agent, items), signal, requestId: turn.turnId })) {
        const read = readChunk(chunk);
        if (read.usage) Object.assign(usage, read.usage);
        if (read.content) {
          content += read.content;
          emit({ event: 'delta', data: { content: read.content } });
        }
        calls.add(read.toolCalls);
      }
      if (signal.aborted) throw signal.reason;
      const toolCalls = calls.result();
      await settleDurably(turn, { status: 'completed', content, toolCalls, usage }, signal);
      if (toolCalls.length > 0) emit({ event: 'tool_calls', data: { tool_calls: toolCalls } });
    } catch (err) {
      const unreachable = isDatabaseUnreachable(err);
      const error = signal.aborted ? 'turn cancelled' : err instanceof AppError ? err.message : unreachable ? 'database unavailable' : 'model call failed';
      if (!(err instanceof AppError) && !signal.aborted && !unreachable) ctx.log.error({ err, turn_id: turn.turnId }, 'agent turn failed');
      await settleDurably(turn, { status: signal.aborted ? 'cancelled' : 'failed', error }, signal).catch((e) =>
        ctx.log.error({ err: e, turn_id: turn.turnId }, 'could not record the agent turn outcome'),
      );
      emit({ event: 'error', data: { error } });
    }
    emit({ event: 'turn.completed', data: {} });
  }

  /** Runs a turn in the background; `emit` (if any) receives its frames. */
  function run(turn: TurnStart, emit: (frame: Frame) => void = () => {}) {
    const abort = new AbortController();
    const entry = { abort, done: execute(turn, emit, abort.signal) };
    running.set(turn.sessionId, entry);
    // The session's next turn may already be registered when this one's last frame is out.
    entry.done = entry.done.finally(() => running.get(turn.sessionId) === entry && running.delete(turn.sessionId));
    return entry.done;
  }

  /** Frames of a turn as a stream; cancelling the stream stops listening, not the turn. */
  function frames(turn: TurnStart): ReadableStream<Frame> {
    let listening = true;
    let controller!: ReadableStreamDefaultController<Frame>;
    const stream = new ReadableStream<Frame>({
      start: (c) => {
        controller = c;
      },
      cancel: () => {
        listening = false;
      },
    });
    void run(turn, (frame) => listening && controller.enqueue(frame)).finally(() => listening && controller.close());
    return stream;
  }

  ctx.onShutdown(async () => {
    const turns = [...running.values()];
    for (const t of turns) t.abort.abort(new Error('shutting down'));
    await Promise.allSettled(turns.map((t) => t.done));
  });

  return {
    /** POST …/events: persists the event; a turn it starts runs in the background. */
    async postEvent(p: Principal, sessionId: string, input: EventInput) {
      const accepted = await accept(p, sessionId, input);
      if (accepted.turn) void run(accepted.turn);
      return accepted.event;
    },

    /**
     * POST …/events/stream: persists the event and streams the turn it starts. Tool results that
     * leave calls unanswered start no turn: the stream repeats the calls still pending.
     */
    async streamEvent(p: Principal, sessionId: string, input: EventInput): Promise<ReadableStream<Frame>> {
      const accepted = await accept(p, sessionId, input);
      if (accepted.turn) return frames(accepted.turn);
      const waiting: Frame[] = [
        { event: 'tool_calls', data: { tool_calls: accepted.pending.map(asToolCall) } },
        { event: 'turn.completed', data: {} },
      ];
      return new ReadableStream<Frame>({
        start(c) {
          for (const f of waiting) c.enqueue(f);
          c.close();
        },
      });
    },

    /** Stops this process's running turn of a session (it is recorded as cancelled, if still there). */
    async cancel(sessionId: string) {
      const turn = running.get(sessionId);
      if (!turn) return;
      turn.abort.abort(new Error('cancelled'));
      await turn.done;
    },
  };
}

/**
 * Stored Responses API answers: kept 30 days for their owner (the key owner), read back by
 * GET /v1/responses/{id} and continued by `previous_response_id`. They live in the database, so
 * any replica continues a conversation another one answered. A missing, foreign or expired
 * response is the same 404. Every replica sweeps expired rows; an advisory lock lets one at a time.
 */
import { and, eq, gt, inArray, lt, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { startLockedSweeper } from '../../platform/db/locked-sweeper';
import { AppError } from '../../platform/errors';
import { storedResponses } from './gateway.tables';

type Json = Record<string, unknown>;

export const RESPONSE_RETENTION_DAYS = 30;
const DAY_MS = 86_400_000;
const SWEEP_EVERY_MS = 10 * 60_000;
const BATCH = 1000;
/** The sweep's advisory lock key: any constant of our own ("cpd_resp" in ASCII). */
const SWEEP_LOCK_KEY = String(0x6370645f72657370n);
/** How many responses one conversation may chain (a bound on the recursive read, far above any agent session). */
const MAX_CHAIN = 10_000;

export interface ResponseToStore {
  id: string;
  userId: string;
  previousResponseId: string | null;
  input: Json[];
  response: Json;
}

const notFound = (id: string) => new AppError('not_found', `response ${JSON.stringify(id)} not found (unknown, expired, not stored, or not yours)`);

export function createResponseStore(ctx: AppContext) {
  const { db } = ctx.database;

  async function save(r: ResponseToStore): Promise<void> {
    const createdAt = ctx.clock.now();
    await db.insert(storedResponses).values({ ...r, createdAt, expiresAt: new Date(createdAt.getTime() + RESPONSE_RETENTION_DAYS * DAY_MS) });
  }

  /** The stored response object, or 404. */
  async function get(userId: string, id: string): Promise<Json> {
    const [row] = await db
      .select({ response: storedResponses.response })
      .from(storedResponses)
      .where(and(eq(storedResponses.id, id), eq(storedResponses.userId, userId), gt(storedResponses.expiresAt, ctx.clock.now())))
      .limit(1);
    if (!row) throw notFound(id);
    return row.response;
  }

  async function remove(userId: string, id: string): Promise<Json> {
    const gone = await db
      .delete(storedResponses)
      .where(and(eq(storedResponses.id, id), eq(storedResponses.userId, userId), gt(storedResponses.expiresAt, ctx.clock.now())))
      .returning({ id: storedResponses.id });
    if (!gone.length) throw notFound(id);
    return { id, object: 'response', deleted: true };
  }

  /**
   * The conversation a response ends: every input and output item of it and the responses it
   * continues, oldest first. One recursive read; a chain whose earlier response is gone (expired
   * or deleted) cannot be continued faithfully, so it is refused rather than cut short.
   */
  async function conversation(userId: string, id: string): Promise<Json[]> {
    const now = ctx.clock.now().toISOString();
    const rows = await ctx.database.query<{ id: string; previous_response_id: string | null; input: Json[] | string; output: Json[] | string; depth: number }>(sql`
      with recursive chain as (
        select id, previous_response_id, input, response -> 'output' as output, 0 as depth
          from stored_responses where id = ${id} and user_id = ${userId} and expires_at > ${now}::timestamptz
        union all
        select s.id, s.previous_response_id, s.input, s.response -> 'output', c.depth + 1
          from stored_responses s join chain c on s.id = c.previous_response_id
          where s.user_id = ${userId} and s.expires_at > ${now}::timestamptz and c.depth < ${MAX_CHAIN}
      )
      select id, previous_response_id, input, output, depth from chain order by depth desc`);
    if (!rows.length) throw notFound(id);
    const oldest = rows[0]!;
    if (oldest.previous_response_id !== null) throw notFound(oldest.previous_response_id);
    // Drivers differ on whether jsonb comes back parsed.
    const items = (v: Json[] | string): Json[] => (typeof v === 'string' ? (JSON.parse(v) as Json[]) : (v ?? []));
    return rows.flatMap((r) => [...items(r.input), ...items(r.output)]);
  }

  const { sweep } = startLockedSweeper(ctx, {
    name: 'stored responses',
    lockKey: SWEEP_LOCK_KEY,
    everyMs: SWEEP_EVERY_MS,
    batch: BATCH,
    async deleteBatch(tx, limit) {
      const expired = await tx.select({ id: storedResponses.id }).from(storedResponses).where(lt(storedResponses.expiresAt, ctx.clock.now())).limit(limit);
      if (expired.length) await tx.delete(storedResponses).where(inArray(storedResponses.id, expired.map((e) => e.id)));
      return expired.length;
    },
  });

  return { save, get, remove, conversation, sweep };
}

export type ResponseStore = ReturnType<typeof createResponseStore>;

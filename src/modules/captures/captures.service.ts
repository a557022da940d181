/**
 * Captured requests (docs/captures.md): which requests are captured (the key's `capture` flag, or
 * an admin rule's sample), their lists and details for their owner and for admins, and what a
 * replay needs of one. Writing is captures.writer.ts's, expiry captures.sweeper.ts's.
 */
import { and, desc, eq, gte, lt } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { decodeCursor, olderThan, page } from '../../platform/cursor';
import { AppError } from '../../platform/errors';
import { toMajor } from '../../platform/money';
import type { ObjectStore } from '../../platform/storage';
import { type CaptureRules, type CaptureSettings, createCaptureRules } from './captures.rules';
import { startCaptureSweeper } from './captures.sweeper';
import { parseTime } from '../usage';
import { captures } from './captures.tables';
import { type CaptureRecord, createCaptureWriter } from './captures.writer';

export interface CaptureQuery {
  from?: string;
  to?: string;
  model?: string;
  key_id?: string;
  user_id?: string;
  limit?: number;
  cursor?: string;
}

export interface CaptureDeps {
  store: ObjectStore;
  /** Whether an API key's owner turned capture on for it (the accounts module's key cache). */
  keyCaptures(keyId: string): Promise<boolean>;
}

type CaptureRow = typeof captures.$inferSelect;

export function createCapturesService(ctx: AppContext, deps: CaptureDeps) {
  const { db } = ctx.database;
  const rules: CaptureRules = createCaptureRules(ctx);
  const writer = createCaptureWriter(ctx, deps.store, () => rules.current().retention_days);
  const currency = ctx.config.currency;

  const view = (r: CaptureRow) => ({
    id: r.id,
    created_at: r.createdAt.toISOString(),
    expires_at: r.expiresAt.toISOString(),
    user_id: r.userId,
    key_id: r.keyId,
    endpoint: r.endpoint,
    entrypoint: r.entrypoint,
    model: r.model,
    status: r.status,
    latency_ms: r.latencyMs,
    backend: r.backend,
    usage_id: r.usageId,
    streamed: r.streamed,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    cost: toMajor(r.costMicros),
    currency,
    request_truncated: r.requestTruncated,
    response_truncated: r.responseTruncated,
    replay_of: r.replayOf,
  });

  /** Whether this request is captured: its key says so, or a rule samples it. Cheap: both are in memory. */
  async function shouldCapture(caller: { userId: string; keyId: string | null }, model: string): Promise<boolean> {
    if (caller.keyId && (await deps.keyCaptures(caller.keyId))) return true;
    return rules.sampled(caller.userId, model);
  }

  /** `userId` null: everyone's (admin). Newest first; `from` inclusive, `to` exclusive. */
  async function list(userId: string | null, q: CaptureQuery) {
    const from = q.from ? parseTime('from', q.from) : null;
    const to = q.to ? parseTime('to', q.to) : null;
    if (from && to && from > to) throw new AppError('invalid', 'from must not be after to');
    const limit = q.limit ?? 50;
    const owner = userId ?? q.user_id;
    const rows = await db
      .select()
      .from(captures)
      .where(
        and(
          owner ? eq(captures.userId, owner) : undefined,
          from ? gte(captures.createdAt, from) : undefined,
          to ? lt(captures.createdAt, to) : undefined,
          q.model ? eq(captures.model, q.model) : undefined,
          q.key_id ? eq(captures.keyId, q.key_id) : undefined,
          gte(captures.expiresAt, ctx.clock.now()),
          olderThan(captures, captures.createdAt, captures.id, decodeCursor(q.cursor)),
        ),
      )
      .orderBy(desc(captures.createdAt), desc(captures.id))
      .limit(limit + 1);
    const { items, nextCursor } = page(rows, limit);
    return { captures: items.map(view), next_cursor: nextCursor };
  }

  /** A capture's row, the caller's own (or anyone's for `userId` null); another's or an expired one is 404. */
  async function row(userId: string | null, id: string): Promise<CaptureRow> {
    const [r] = await db
      .select()
      .from(captures)
      .where(and(eq(captures.id, id), userId ? eq(captures.userId, userId) : undefined, gte(captures.expiresAt, ctx.clock.now())))
      .limit(1);
    if (!r) throw new AppError('not_found', 'capture not found');
    return r;
  }

  /** GET /api/captures/{id}: the row and its bodies (request as received, answer). */
  async function get(userId: string | null, id: string) {
    const r = await row(userId, id);
    const bodies = await writer.readBodies(r.objectKey).catch((err) => {
      ctx.log.warn({ err, capture_id: id }, 'could not read a capture\'s bodies');
      throw new AppError('unavailable', 'the captured bodies could not be read');
    });
    return { ...view(r), request: bodies.request, response: bodies.answer };
  }

  /** What a replay runs again: the endpoint, the request as received, whether it streamed. */
  async function replaySource(userId: string | null, id: string) {
    const r = await row(userId, id);
    if (r.requestTruncated) throw new AppError('conflict', 'the captured request was cut at the size limit and cannot be replayed');
    const { request } = await writer.readBodies(r.objectKey).catch(() => {
      throw new AppError('unavailable', 'the captured request could not be read');
    });
    if (!request || typeof request !== 'object' || Array.isArray(request)) throw new AppError('conflict', 'the captured request cannot be replayed');
    return { id: r.id, endpoint: r.endpoint as CaptureRecord['endpoint'], body: request as Record<string, unknown>, streamed: r.streamed };
  }

  async function setSettings(next: CaptureSettings) {
    return rules.replace(next);
  }

  const sweeper = startCaptureSweeper(ctx, deps.store);

  return {
    ready: () => rules.load().then(() => {}),
    shouldCapture,
    record: writer.enqueue,
    list,
    get,
    replaySource,
    settings: () => rules.current(),
    setSettings,
    /** Deletes expired captures now (the periodic sweep runs on its own); answers how many. */
    sweep: sweeper.sweep,
    /** Resolves once every capture handed over so far is written (tests). */
    flush: writer.flush,
  };
}

export type CapturesService = ReturnType<typeof createCapturesService>;

/**
 * The usage log: a caller's own router_usage rows one by one, newest first, as JSON pages and as
 * a CSV export. Both read an index in keyset order, (user_id, created_at, id), or (user_id,
 * key_id, created_at, id) with a key filter, so a page costs the same on the first day and on the
 * millionth row, and the export streams page by page: memory stays at one page whatever the range.
 */
import { and, desc, eq, gte, lt } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { type CursorKey, decodeCursor, olderThan, page } from '../../platform/cursor';
import { AppError } from '../../platform/errors';
import { toMajor } from '../../platform/money';
import { parseTime } from './usage.cost';
import { routerUsage } from '../metering';
import { apiKeyNames } from '../accounts';

export interface UsageLogQuery {
  from?: string;
  to?: string;
  model?: string;
  key_id?: string;
  limit?: number;
  cursor?: string;
}

/** Rows per database read of the CSV export. */
const EXPORT_PAGE = 1000;

const COLUMNS = ['id', 'created_at', 'entrypoint', 'model', 'key_id', 'prompt_tokens', 'completion_tokens', 'cost', 'currency', 'status', 'streamed', 'latency_ms', 'clamped', 'cached_tokens', 'reasoning_tokens'] as const;

type UsageRow = typeof routerUsage.$inferSelect;
const usageView = (r: UsageRow) => ({
  id: r.id,
  created_at: r.createdAt.toISOString(),
  entrypoint: r.entrypoint,
  model: r.model,
  key_id: r.keyId,
  prompt_tokens: r.promptTokens,
  completion_tokens: r.completionTokens,
  cost: toMajor(r.costMicros),
  currency: r.currency,
  status: r.status,
  streamed: r.streamed,
  latency_ms: r.latencyMs,
  clamped: r.clamped,
  cached_tokens: r.cachedTokens,
  reasoning_tokens: r.reasoningTokens,
});

/**
 * One RFC 4180 field: quoted when it holds a comma, quote, CR or LF, quotes doubled. Hand-written:
 * thirteen known columns of plain values need these three lines, not a CSV library
 * (docs/decisions/0012-csv-export-fields.md).
 */
function csvField(value: unknown): string {
  const text = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
const csvLine = (values: readonly unknown[]) => `${values.map(csvField).join(',')}\r\n`;

export function createUsageLog(ctx: AppContext) {
  // The read replica when one is configured: a long export never holds a primary connection.
  const { db } = ctx.reportDatabase ?? ctx.database;

  function filters(userId: string, q: UsageLogQuery) {
    const from = q.from ? parseTime('from', q.from) : null;
    const to = q.to ? parseTime('to', q.to) : null;
    if (from && to && from > to) throw new AppError('invalid', 'from must not be after to');
    return and(
      eq(routerUsage.userId, userId),
      from ? gte(routerUsage.createdAt, from) : undefined,
      to ? lt(routerUsage.createdAt, to) : undefined,
      q.model ? eq(routerUsage.model, q.model) : undefined,
      q.key_id ? eq(routerUsage.keyId, q.key_id) : undefined,
    );
  }

  async function rows(userId: string, q: UsageLogQuery, after: CursorKey | null, limit: number) {
    return db
      .select()
      .from(routerUsage)
      .where(and(filters(userId, q), olderThan(routerUsage, routerUsage.createdAt, routerUsage.id, after)))
      .orderBy(desc(routerUsage.createdAt), desc(routerUsage.id))
      .limit(limit + 1);
  }

  /** GET /api/usage: the caller's rows, newest first, `from` inclusive, `to` exclusive. */
  async function list(userId: string, q: UsageLogQuery) {
    const limit = q.limit ?? 50;
    const { items, nextCursor } = page(await rows(userId, q, decodeCursor(q.cursor), limit), limit);
    // The key's name beside its id, revoked keys too: the console lists only live keys.
    const keys = await apiKeyNames(db, userId, [...new Set(items.flatMap((r) => (r.keyId ? [r.keyId] : [])))]);
    const usage = items.map((r) => {
      const key = r.keyId ? keys.get(r.keyId) : undefined;
      return { ...usageView(r), key_name: key?.name ?? null, key_revoked: key?.revoked ?? false };
    });
    return { usage, next_cursor: nextCursor };
  }

  /**
   * The same rows as CSV with a header line. Filters are checked before the first byte (a bad
   * one is a 400, not a broken download); each pull reads the next page after the last row sent.
   */
  function exportCsv(userId: string, q: UsageLogQuery): ReadableStream<Uint8Array> {
    filters(userId, q);
    let after: CursorKey | null = null;
    let headerSent = false;
    const text = new ReadableStream<string>(
      {
        async pull(controller) {
          if (!headerSent) {
            headerSent = true;
            controller.enqueue(csvLine(COLUMNS));
            return;
          }
          const { items, nextCursor } = page(await rows(userId, q, after, EXPORT_PAGE), EXPORT_PAGE);
          const lines = items.map((r) => {
            const view = usageView(r);
            return csvLine(COLUMNS.map((c) => view[c]));
          });
          if (lines.length) controller.enqueue(lines.join(''));
          const last = items.at(-1);
          if (!nextCursor || !last) return controller.close();
          after = { createdAt: last.createdAt, id: last.id };
        },
      },
      { highWaterMark: 1 },
    );
    return text.pipeThrough(new TextEncoderStream());
  }

  return { list, exportCsv };
}

export type UsageLog = ReturnType<typeof createUsageLog>;

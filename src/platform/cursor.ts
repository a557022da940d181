/**
 * Keyset cursors for newest-first lists: the cursor is the (created_at, id) of the last row
 * served, base64url-encoded. Rows inserted meanwhile sort before it, so pages never shift.
 */
import { type AnyColumn, type SQL, sql } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import { AppError } from './errors';

export interface CursorKey {
  createdAt: Date;
  id: string;
}

export function encodeCursor(key: CursorKey): string {
  return Buffer.from(JSON.stringify([key.createdAt.toISOString(), key.id])).toString('base64url');
}

export function decodeCursor(cursor: string | undefined): CursorKey | null {
  if (cursor === undefined) return null;
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    const createdAt = new Date(String(at));
    if (typeof at === 'string' && typeof id === 'string' && id && !Number.isNaN(createdAt.getTime())) return { createdAt, id };
  } catch {}
  throw new AppError('invalid', 'cursor is not valid');
}

/**
 * The rows after `after` in (created_at desc, id desc) order, as one row comparison, so an index
 * on (…, created_at, id) serves it as a range; undefined (no condition) on the first page.
 * The cursor row's own stored time is used when it still exists: a table whose times come from
 * the database has microseconds, which the cursor's millisecond time would round (and so skip or
 * repeat rows at a page edge).
 */
export function olderThan(table: PgTable, createdAt: AnyColumn, id: AnyColumn, after: CursorKey | null): SQL | undefined {
  if (!after) return undefined;
  const stored = sql`(select ${createdAt} from ${table} where ${id} = ${after.id})`;
  return sql`(${createdAt}, ${id}) < (coalesce(${stored}, ${after.createdAt.toISOString()}::timestamptz), ${after.id})`;
}

/** Takes limit+1 rows: the extra row only tells whether a next page exists. */
export function page<T extends { createdAt: Date; id: string }>(rows: T[], limit: number): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
}

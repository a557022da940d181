/**
 * Keyset cursors for newest-first lists, stable under concurrent inserts: the cursor is the (created_at, id) of the
 * last row served, base64url-encoded. Rows inserted meanwhile sort before it, so pages never shift.
 */
import { AppError } from '../../platform/errors';

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

/** Takes limit+1 rows: the extra row only tells whether a next page exists. */
export function page<T extends { createdAt: Date; id: string }>(rows: T[], limit: number): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
}

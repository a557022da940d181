/** A duplicate key in a unique index or primary key. */
export const UNIQUE_VIOLATION = '23505';

/** PostgreSQL's SQLSTATE of a failed query (23505, 42P01…), found on drizzle's wrapper or its cause. */
export function sqlState(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | null, depth = 0; e && typeof e === 'object' && depth < 8; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
  }
  return undefined;
}

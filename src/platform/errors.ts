/**
 * Services throw AppError with a kind, never an HTTP status; platform/http/errors.ts maps kinds
 * to statuses and `{error}` bodies once for the whole app.
 */
import { safeError } from './safe-error';

export type ErrorKind =
  | 'invalid'
  | 'unauthorized'
  | 'payment_required'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'not_implemented'
  | 'upstream'
  | 'unavailable';

export const STATUS_OF_KIND: Record<ErrorKind, number> = {
  invalid: 400,
  unauthorized: 401,
  payment_required: 402,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  not_implemented: 501,
  upstream: 502,
  unavailable: 503,
};

/** The status of a request whose client left before it was answered (nginx's 499): no one reads it. */
export const CLIENT_CLOSED_REQUEST = 499;

export class AppError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    /** Extra response headers, e.g. Retry-After on rate_limited. */
    readonly headers: Record<string, string> = {},
    /** Returned instead of {error} where the spec says so (409 invoice returns the record). */
    readonly body?: unknown,
  ) {
    super(message);
  }
}

/**
 * A setting that cannot be used, naming its variable: the CLI prints that one line and exits 2.
 * Thrown by the config layer's checkers (config-parse.ts) and by platform code that finds a
 * setting wrong only when it uses it (a database of another SITE, a DATA_DIR it cannot write).
 */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

/**
 * An operator-facing failure: one line on stderr, then `exitCode`: 2 when the operator can fix it
 * by configuration (database unreachable, in use, not where expected), 1 otherwise (port taken).
 */
export class FatalError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(message);
  }
}

/**
 * The innermost cause's first line ("connect ECONNREFUSED …" rather than drizzle's "Failed
 * query: …"), without values (safeError).
 */
export function rootMessage(err: unknown): string {
  let e = err as { message?: unknown; cause?: unknown } | null;
  while (e && typeof e === 'object' && e.cause && typeof e.cause === 'object') e = e.cause as typeof e;
  return safeError(e).message.split('\n')[0]!;
}

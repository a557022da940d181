/**
 * Services throw AppError with a kind, never an HTTP status; platform/http/errors.ts maps kinds
 * to statuses and `{error}` bodies once for the whole app.
 */
export type ErrorKind =
  | 'invalid'
  | 'unauthorized'
  | 'payment_required'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'payload_too_large'
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
  rate_limited: 429,
  not_implemented: 501,
  upstream: 502,
  unavailable: 503,
};

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

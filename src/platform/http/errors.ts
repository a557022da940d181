/**
 * The error contract: every non-2xx body is {"error": string} as JSON; Elysia's
 * own 422 and plain-text 404 never leak; unknown errors become 500 without internals.
 */
import { Elysia } from 'elysia';
import { sqlState } from '../db/sql-state';
import { isDatabaseUnreachable } from '../db/unreachable';
import { AppError, CLIENT_CLOSED_REQUEST, STATUS_OF_KIND } from '../errors';
import { checkDeclaredLength, withBodyLimit } from './body-limit';
import { moveContextHeaders } from './context-headers';
import type { Logger } from '../logger';
import { carryRequestLog } from './request-log';

export const JSON_TYPE = 'application/json; charset=utf-8';

export function jsonError(status: number, error: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ error }), { status, headers: { 'content-type': JSON_TYPE, ...headers } });
}

/** Maps any thrown value to a Response; exported for handlers that stream (SSE) or run outside Elysia. */
export function errorResponse(error: unknown, code: string | number, log: Logger, requestId?: string): Response {
  if (error instanceof AppError) {
    const status = STATUS_OF_KIND[error.kind];
    if (error.body !== undefined)
      return new Response(JSON.stringify(error.body), { status, headers: { 'content-type': JSON_TYPE, ...error.headers } });
    return jsonError(status, error.message, error.headers);
  }
  switch (code) {
    case 'VALIDATION':
      return jsonError(400, validationMessage(error));
    case 'PARSE':
      // Reading the body failed for a reason of ours (the body limit while streaming): that answer.
      if ((error as Error)?.cause instanceof AppError) return errorResponse((error as Error).cause, 'UNKNOWN', log, requestId);
      return jsonError(400, 'request body is not valid JSON');
    case 'NOT_FOUND':
      return jsonError(404, 'not found');
    case 'INVALID_COOKIE_SIGNATURE':
      return jsonError(400, 'invalid cookie');
    case 'INVALID_FILE_TYPE':
      return jsonError(400, 'invalid file type');
  }
  if (typeof code === 'number' && code >= 400 && code < 500) return jsonError(code, String((error as Error)?.message ?? 'bad request'));
  switch (sqlState(error)) {
    case '23505':
      return jsonError(409, 'already exists');
    case '23503':
      return jsonError(404, 'referenced resource not found');
    case '22P02':
    case '22003':
    case '22007':
    case '22008':
    case '22021': // NUL or invalid UTF-8 in a text value ("%00" in a path id)
    case '22P05': // \u0000 inside a jsonb value
      return jsonError(400, 'malformed value');
    case '40P01': // deadlock detected: PostgreSQL aborted this transaction for another
    case '40001': // serialization failure
      log.warn({ err: error, request_id: requestId }, 'transaction aborted by a concurrent one');
      return jsonError(503, 'the database aborted this request to resolve a conflict with a concurrent one; retry it', { 'retry-after': '1' });
  }
  if (isDatabaseUnreachable(error)) {
    log.warn({ err: error, request_id: requestId }, 'database unavailable');
    return jsonError(503, 'database unavailable');
  }
  log.error({ err: error, request_id: requestId }, 'unhandled error');
  return jsonError(500, 'internal server error');
}

function validationMessage(error: unknown): string {
  const e = error as { all?: Array<{ path?: string; summary?: string; message?: string }>; type?: string };
  const first = Array.isArray(e?.all) ? e.all[0] : undefined;
  if (first) {
    const where = first.path ? first.path.replace(/^\//, '').replace(/\//g, '.') : (e.type ?? 'request');
    return `invalid ${where || e.type || 'request'}: ${first.summary ?? first.message ?? 'does not match the schema'}`;
  }
  return 'invalid request';
}

/**
 * Largest request body the API accepts (routes with their own, smaller limit check it too).
 * Answered here with our JSON 413: a declared Content-Length before anything is read, a chunked
 * body as soon as it passes the limit while being read (platform/http/body-limit.ts). Bun's own
 * limit (maxRequestBodySize in platform/http/listen.ts) is only a backstop: it answers a bare 413.
 */
export const MAX_REQUEST_BODY_BYTES = 64 * 1024 * 1024;

export const errorPlugin = (log: Logger) =>
  new Elysia({ name: 'cpd/errors' })
    .onRequest((context) => {
      const { request } = context;
      if (request.headers.has('content-length')) return checkDeclaredLength(request, MAX_REQUEST_BODY_BYTES);
      // No declared length: swap in a counting body before any parser or handler reads it. Elysia
      // reads the body from the context's request, so replacing it here covers every route.
      if (!request.body) return;
      const limited = withBodyLimit(request, MAX_REQUEST_BODY_BYTES);
      carryRequestLog(request, limited);
      (context as { request: Request }).request = limited;
    })
    .onError({ as: 'global' }, ({ error, code, set, request }) => {
      // The client went away before it was answered (in the middle of sending its body, say): no
      // one is left to read an answer and nothing failed here. Logged and counted as 499 (nginx's
      // "client closed request"), not as a 500 with an error line an operator would chase, nor as
      // a 400 for the body it never finished. Any other failure keeps its answer and its log line.
      const response =
        request.signal.aborted && (code === 'PARSE' || (error as { name?: unknown } | null)?.name === 'AbortError')
          ? jsonError(CLIENT_CLOSED_REQUEST, 'the client closed the request')
          : errorResponse(error, code, log, set.headers['x-request-id'] as string | undefined);
      set.status = response.status; // read by the access log
      moveContextHeaders(response, set.headers); // X-Request-Id among them
      return response;
    });

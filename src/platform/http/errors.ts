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

/**
 * A schema failure said for a person, with the field named as code would write it:
 * "invalid models[0].price: must be a number", not the validator's "Expected number". The
 * "invalid <field>: " prefix stays, so clients that match on it keep working.
 */
function validationMessage(error: unknown): string {
  const e = error as { all?: Array<{ path?: string; summary?: string; message?: string; schema?: Schema; value?: unknown }>; type?: string };
  const first = Array.isArray(e?.all) ? e.all[0] : undefined;
  if (first) {
    const where = first.path ? fieldName(first.path) : '';
    const problem = first.schema ? describeProblem(first.schema, first.value) : null;
    return `invalid ${where || e.type || 'request'}: ${problem ?? first.summary ?? first.message ?? 'does not match the schema'}`;
  }
  return 'invalid request';
}

/** "/models/0/price" → "models[0].price". */
const fieldName = (pointer: string) =>
  pointer
    .split('/')
    .slice(1)
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce((name, part) => (/^\d+$/.test(part) ? `${name}[${part}]` : name ? `${name}.${part}` : part), '');

interface Schema {
  type?: string;
  anyOf?: Schema[];
  const?: unknown;
  enum?: unknown[];
  format?: string;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/** What `value` fails of `schema`, as "must be …"; null when it cannot tell (the validator's words are used then). */
function describeProblem(schema: Schema, value: unknown): string | null {
  if (value === undefined) return 'is required';
  if (schema.anyOf) {
    const choices = schema.anyOf.filter((s) => 'const' in s).map((s) => JSON.stringify(s.const));
    if (choices.length === schema.anyOf.length) return `must be one of ${choices.join(', ')}`;
    const nullable = schema.anyOf.some((s) => s.type === 'null');
    const others = schema.anyOf.filter((s) => s.type !== 'null');
    const inner = others.length === 1 && others[0] && value !== null ? describeProblem(others[0], value) : null;
    return inner ? `${inner}${nullable ? ', or null' : ''}` : null;
  }
  if ('const' in schema) return `must be ${JSON.stringify(schema.const)}`;
  if (schema.enum) return `must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`;
  switch (schema.type) {
    case 'number':
    case 'integer':
      return numberProblem(schema, value);
    case 'string':
      if (typeof value !== 'string') return 'must be a string';
      if (schema.minLength !== undefined && value.length < schema.minLength)
        return schema.minLength === 1 ? 'must not be empty' : `must be at least ${plural(schema.minLength, 'character')}`;
      if (schema.maxLength !== undefined && value.length > schema.maxLength) return `must be at most ${plural(schema.maxLength, 'character')}`;
      if (schema.format) return `must be a valid ${schema.format}`;
      return schema.pattern ? 'is not in the expected format' : null;
    case 'boolean':
      return 'must be true or false';
    case 'array':
      if (!Array.isArray(value)) return 'must be a list';
      if (schema.minItems !== undefined && value.length < schema.minItems) return `must have at least ${plural(schema.minItems, 'item')}`;
      if (schema.maxItems !== undefined && value.length > schema.maxItems) return `must have at most ${plural(schema.maxItems, 'item')}`;
      return null;
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? 'has a field that is not allowed' : 'must be an object';
  }
  return null;
}

function numberProblem(schema: Schema, value: unknown): string | null {
  if (typeof value !== 'number') return schema.type === 'integer' ? 'must be a whole number' : 'must be a number';
  if (schema.type === 'integer' && !Number.isInteger(value)) return 'must be a whole number';
  if (schema.minimum !== undefined && value < schema.minimum) return schema.minimum === 0 ? 'must be zero or more' : `must be ${schema.minimum} or more`;
  if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum)
    return schema.exclusiveMinimum === 0 ? 'must be more than zero' : `must be more than ${schema.exclusiveMinimum}`;
  if (schema.maximum !== undefined && value > schema.maximum) return `must be ${schema.maximum} or less`;
  if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) return `must be less than ${schema.exclusiveMaximum}`;
  return null;
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

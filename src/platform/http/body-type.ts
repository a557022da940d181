/**
 * JSON endpoints take `application/json` bodies only (415 otherwise). A form or multipart body is
 * what an HTML form on another site can send without asking (no CORS preflight), so refusing it
 * closes that door; it also keeps every body parsed by one parser.
 *
 * Paths whose bodies are what an outside system sends (payment providers' notifications, the
 * sandbox checkout's form buttons) are named by their module and exempt. A refused request is
 * answered 415 after the route's authentication (a stranger gets 401 whatever the body): when
 * its body fails to parse or validate, or before the handler.
 * No parse hook is used: Elysia documents a route's JSON body in the OpenAPI document only while
 * the route has no custom parser, and honours `parse: 'none'` (raw bodies) only when it is alone.
 */
import { Elysia } from 'elysia';
import { AppError } from '../errors';
import { jsonError } from './errors';

const JSON_MEDIA = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

function hasBody(request: Request): boolean {
  const length = request.headers.get('content-length');
  return length !== null ? length.trim() !== '0' : request.body !== null;
}

const MESSAGE = 'request body must be JSON (content-type: application/json)';

export const jsonBodiesOnly = (exemptPrefixes: readonly string[]) => {
  // Decided from the request's own headers wherever asked (Elysia may hand later hooks another
  // Request object than onRequest saw, so nothing is remembered between hooks).
  const refused = (request: Request) =>
    hasBody(request) &&
    !JSON_MEDIA.test(request.headers.get('content-type') ?? '') &&
    !exemptPrefixes.some((prefix) => new URL(request.url).pathname.startsWith(prefix));
  return new Elysia({ name: 'cpd/json-bodies' })
    .onError({ as: 'global' }, ({ request, code }) =>
      (code === 'VALIDATION' || code === 'PARSE') && refused(request) ? jsonError(415, MESSAGE) : undefined,
    )
    .onBeforeHandle({ as: 'global' }, ({ request }) => {
      if (refused(request)) throw new AppError('unsupported_media_type', MESSAGE);
    });
};

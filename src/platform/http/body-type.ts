/**
 * JSON endpoints take `application/json` bodies only (415 otherwise). A form or multipart body is
 * what an HTML form on another site can send without asking (no CORS preflight), so refusing it
 * closes that door; it also keeps every body parsed by one parser.
 *
 * Paths whose bodies are what an outside system sends (payment providers' notifications) are
 * named by their module and exempt. The body of a refused request is never parsed: the parse
 * hook hands a placeholder on, and the 415 is answered after the route's authentication (a
 * stranger gets 401 whatever the body), at validation or before the handler.
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
  const refused = new WeakSet<Request>();
  return new Elysia({ name: 'cpd/json-bodies' })
    // Routes that read their raw body (`parse: 'none'`: the gateway, provider notifications): once
    // a route has other parse hooks, Elysia looks 'none' up as a named parser. This one hands a
    // placeholder on and leaves the stream unread.
    .parser('none', () => '')
    .onParse({ as: 'global' }, ({ request, path }) => {
      if (!hasBody(request) || JSON_MEDIA.test(request.headers.get('content-type') ?? '')) return;
      if (exemptPrefixes.some((prefix) => path.startsWith(prefix))) return;
      refused.add(request);
      return {};
    })
    .onError({ as: 'global' }, ({ request, code }) => (code === 'VALIDATION' && refused.has(request) ? jsonError(415, MESSAGE) : undefined))
    .onBeforeHandle({ as: 'global' }, ({ request }) => {
      if (refused.has(request)) throw new AppError('unsupported_media_type', MESSAGE);
    });
};

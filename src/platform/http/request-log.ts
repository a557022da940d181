/**
 * X-Request-Id on every response and one structured access line per request: method, path
 * without the query string, status, duration and request id. Never headers, cookies or bodies.
 */
import { Elysia } from 'elysia';
import { randomBase62 } from '../ids';
import { moveContextHeaders } from './context-headers';
import type { Logger } from '../logger';

const started = new WeakMap<Request, { id: string; at: number }>();

export function requestIdOf(request: Request): string | undefined {
  return started.get(request)?.id;
}

/** Another hook replaced the context's request with `to` (a wrapped body): it keeps `from`'s id and arrival. */
export function carryRequestLog(from: Request, to: Request): void {
  const info = started.get(from);
  if (info) started.set(to, info);
}

/** When the request arrived (performance.now()), for the duration metric. */
export function requestStartOf(request: Request): number | undefined {
  return started.get(request)?.at;
}

export const requestLogPlugin = (log: Logger) =>
  new Elysia({ name: 'cpd/request-log' })
    .onRequest(({ set, request }) => {
      const incoming = request.headers.get('x-request-id');
      const id = incoming && /^[\w.-]{1,64}$/.test(incoming) ? incoming : randomBase62(20);
      // On the context: a response made by Elysia from a value, an error or an early answer gets it from there.
      set.headers['x-request-id'] = id;
      started.set(request, { id, at: performance.now() });
    })
    // A Response a handler returned gets the context's headers (this id among them) directly.
    // Returns nothing, so later hooks still run.
    .mapResponse({ as: 'global' }, ({ response, set }) => {
      if (response instanceof Response) moveContextHeaders(response, set.headers);
    })
    .onAfterResponse({ as: 'global' }, (ctx) => {
      const { request, set } = ctx;
      const info = started.get(request);
      const responseValue = (ctx as { responseValue?: unknown }).responseValue;
      const status = responseValue instanceof Response ? responseValue.status : typeof set.status === 'number' ? set.status : 200;
      const url = request.url;
      const q = url.indexOf('?');
      log.info({
        msg: 'request',
        method: request.method,
        path: url.slice(url.indexOf('/', url.indexOf('//') + 2), q === -1 ? undefined : q),
        status,
        duration_ms: info ? Math.round((performance.now() - info.at) * 100) / 100 : undefined,
        request_id: info?.id,
      });
    });

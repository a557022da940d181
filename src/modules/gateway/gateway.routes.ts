import { Elysia, t } from 'elysia';
import { chatBody, countTokensBody, embeddingsBody, messagesBody, replayBody, responsesBody } from './gateway.docs';
import type { authPlugin } from '../../platform/http/auth';
import { pathOf } from '../../platform/http/credential-gate';
import { moveContextHeaders } from '../../platform/http/context-headers';
import { errorResponse } from '../../platform/http/errors';
import type { Logger } from '../../platform/logger';
import { holdOpen } from '../../platform/http/listen';
import { requestIdOf } from '../../platform/http/request-log';
import type { GatewayService } from './gateway.service';

const GATEWAY_PATHS = new Set(['/v1/models', '/v1/chat/completions', '/v1/embeddings', '/v1/responses', '/v1/messages', '/v1/messages/count_tokens', '/v1/router/replay']);

/** Anthropic's error type for each status its API answers. */
const ANTHROPIC_ERROR_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  503: 'overloaded_error',
  504: 'timeout_error',
};

const isMessagesPath = (path: string) => path === '/v1/messages' || path.startsWith('/v1/messages/');

/**
 * What the gateway adds to every answer of its paths, errors included:
 * - X-Cost: refusals and failures cost nothing (the error plugin keeps the header). Set when the
 *   request arrives, so the credential gate's 401, answered before any route hook runs, carries it too.
 * - On the Anthropic-compatible routes, errors in Anthropic's shape, `{"type": "error", "error":
 *   {"type", "message"}}`, which its clients read (status and message as on every other route).
 * Mount it before the error plugin (whose onError then runs only for other paths) and the gate.
 */
export const gatewayEdge = (log: Logger) =>
  new Elysia({ name: 'cpd/gateway-edge' })
    .onRequest(({ request, set }) => {
      const path = pathOf(request.url);
      if (GATEWAY_PATHS.has(path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path)) set.headers['x-cost'] = '0.000000';
    })
    .onError({ as: 'global' }, async ({ error, code, set, request }) => {
      // A client gone before its answer is the error plugin's (499, logged as such): no one reads the shape.
      if (!isMessagesPath(pathOf(request.url)) || request.signal.aborted) return;
      const plain = errorResponse(error, code, log, set.headers['x-request-id'] as string | undefined);
      const message = String(((await plain.json().catch(() => ({}))) as { error?: unknown }).error ?? 'error');
      const status = plain.status;
      const type = ANTHROPIC_ERROR_TYPE[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
      const response = new Response(JSON.stringify({ type: 'error', error: { type, message } }), { status, headers: plain.headers });
      set.status = status; // read by the access log
      moveContextHeaders(response, set.headers);
      return response;
    });

const ResponseIdParams = t.Object({ id: t.String({ minLength: 1, maxLength: 200 }) });

/** OpenAI-compatible endpoints; bodies are OpenAI's own, so they are read raw (parse: 'none') and checked by the service. */
/** silenceSeconds: how long a request may stay silent, waiting for its answer or between a stream's chunks (holdOpen). */
export const gatewayRoutes = (deps: { auth: ReturnType<typeof authPlugin>; gateway: GatewayService; silenceSeconds: number }) =>
  new Elysia({ name: 'cpd/gateway' })
    .use(deps.auth)
    // A completion may take longer than the server's idle timeout to answer, and a stream may pause
    // between chunks for as long: each gets ROUTER_REQUEST_TIMEOUT and a margin (docs/gateway.md).
    .onTransform(({ server, request }) => {
      holdOpen(server, request, deps.silenceSeconds);
    })
    .get('/v1/models', ({ caller }) => deps.gateway.models(caller), {
      auth: ['key', 'x-api-key'],
      detail: { summary: "Models and routes this gateway serves (OpenAI's list shape, with Anthropic's fields; key as Bearer or x-api-key)", tags: ['gateway'] },
    })
    .post('/v1/chat/completions', ({ caller, request }) => deps.gateway.chat(caller, request, requestIdOf(request)), {
      auth: ['key'],
      parse: 'none',
      detail: { summary: 'OpenAI chat completions, JSON or SSE; billed to the key owner; X-Cost header', tags: ['gateway'], requestBody: chatBody },
    })
    .post('/v1/embeddings', ({ caller, request }) => deps.gateway.embeddings(caller, request, requestIdOf(request)), {
      auth: ['key'],
      parse: 'none',
      detail: { summary: 'OpenAI embeddings; billed on input tokens; X-Cost header', tags: ['gateway'], requestBody: embeddingsBody },
    })
    .post('/v1/responses', ({ caller, request }) => deps.gateway.responses(caller, request, requestIdOf(request)), {
      auth: ['key'],
      parse: 'none',
      detail: { summary: 'OpenAI Responses API (served through chat completions), JSON or SSE; billed like chat; X-Cost header', tags: ['gateway'], requestBody: responsesBody },
    })
    .get('/v1/responses/:id', ({ caller, params }) => deps.gateway.storedResponse(caller, params.id), {
      auth: ['key'],
      params: ResponseIdParams,
      detail: { summary: "A stored response (the API key owner's, kept 30 days): the Responses object as it was answered", tags: ['gateway'] },
    })
    .delete('/v1/responses/:id', ({ caller, params }) => deps.gateway.deleteResponse(caller, params.id), {
      auth: ['key'],
      params: ResponseIdParams,
      detail: { summary: 'Delete a stored response; it can no longer be read or continued', tags: ['gateway'] },
    })
    .post('/v1/messages', ({ caller, request }) => deps.gateway.messages(caller, request, requestIdOf(request)), {
      auth: ['key', 'x-api-key'],
      parse: 'none',
      detail: {
        summary: 'Anthropic Messages API, JSON or SSE (key as x-api-key or Bearer); passed through to anthropic-format backends, else served through chat completions; billed like chat; X-Cost header; errors in Anthropic\'s shape',
        tags: ['gateway'],
        requestBody: messagesBody,
      },
    })
    .post('/v1/messages/count_tokens', ({ caller, request }) => deps.gateway.countTokens(caller, request), {
      auth: ['key', 'x-api-key'],
      parse: 'none',
      detail: { summary: "Anthropic's token count of a Messages request (cpd's own count, free)", tags: ['gateway'], requestBody: countTokensBody },
    })
    .post('/v1/router/replay', ({ caller, request }) => deps.gateway.replay(caller, request, requestIdOf(request)), {
      auth: ['key', 'session'],
      parse: 'none',
      detail: {
        summary: "Run a captured request again ({capture_id, model?}): the original endpoint's shape, streamed if it was, X-Replay-Of; billed and captured (docs/captures.md)",
        tags: ['gateway'],
        requestBody: replayBody,
      },
    });

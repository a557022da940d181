import { Elysia, t } from 'elysia';
import { chatBody, embeddingsBody, replayBody, responsesBody } from './gateway.docs';
import type { authPlugin } from '../../platform/http/auth';
import { pathOf } from '../../platform/http/credential-gate';
import { holdOpen } from '../../platform/http/listen';
import { requestIdOf } from '../../platform/http/request-log';
import type { GatewayService } from './gateway.service';

const GATEWAY_PATHS = new Set(['/v1/models', '/v1/chat/completions', '/v1/embeddings', '/v1/responses', '/v1/router/replay']);

/**
 * Every gateway response carries X-Cost: refusals and failures cost nothing (the error plugin keeps
 * the header). Set when the request arrives, so the credential gate's 401, answered before any
 * route hook runs, carries it too; mount it before the gate.
 */
export const gatewayCostHeader = () =>
  new Elysia({ name: 'cpd/gateway-cost' }).onRequest(({ request, set }) => {
    const path = pathOf(request.url);
    if (GATEWAY_PATHS.has(path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path)) set.headers['x-cost'] = '0.000000';
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
      auth: ['key'],
      detail: { summary: 'Models and routes this gateway serves (OpenAI list shape)', tags: ['gateway'] },
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
    .post('/v1/router/replay', ({ caller, request }) => deps.gateway.replay(caller, request, requestIdOf(request)), {
      auth: ['key', 'session'],
      parse: 'none',
      detail: {
        summary: "Run a captured request again ({capture_id, model?}): the original endpoint's shape, streamed if it was, X-Replay-Of; billed and captured (docs/captures.md)",
        tags: ['gateway'],
        requestBody: replayBody,
      },
    });

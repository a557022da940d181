/**
 * The OpenAI-compatible gateway: per-key rate limit, body size limit, JSON parsing, then the
 * router (which validates, routes, admits against the wallet, meters and debits). Answers are the
 * upstream's OpenAI objects with `model` as served and `usage.cost` added (site currency).
 *
 * X-Cost: on a JSON answer, the request's cost. On a stream, headers leave when the first token
 * has arrived, before the cost is final, so X-Cost holds the cost known then (the prompt and the
 * first chunk; the per-request price for a per-request model) and `X-Cost-Final: false`; the
 * definitive cost is `usage.cost` in the final chunk, which every stream ends with.
 */
import type { AppContext } from '../../platform/context';
import { AppError } from '../../platform/errors';
import type { Caller } from '../../platform/http/auth';
import { namedLimiter } from '../../platform/http/rate-limit';
import { microsToDecimal } from '../../platform/money';
import { type RouterService, rawJsonOf } from '../router';
import { readBodyBytes } from '../../platform/http/body-limit';
import { JSON_TYPE } from '../../platform/http/errors';

export function createGatewayService(ctx: AppContext, router: RouterService) {
  const limiter = namedLimiter(ctx, 'gateway');
  const maxBody = ctx.config.gateway.maxBodyBytes;
  const encoder = new TextEncoder();

  async function readBody(request: Request): Promise<{ body: Record<string, unknown>; bytes: number }> {
    const raw = await readBodyBytes(request, maxBody);
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder().decode(raw));
    } catch {
      throw new AppError('invalid', 'request body is not valid JSON');
    }
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new AppError('invalid', 'the request body must be a JSON object');
    return { body: body as Record<string, unknown>, bytes: raw.byteLength };
  }

  async function chat(caller: Caller, request: Request, requestId: string | undefined): Promise<Response> {
    limiter.enforce(caller.keyId ?? caller.userId, 1, 'too many requests for this API key');
    const { body, bytes } = await readBody(request);
    const req = { caller: { userId: caller.userId, keyId: caller.keyId }, body, bodyBytes: bytes, signal: request.signal, requestId };
    if (body.stream !== true) {
      const { response, costMicros } = await router.completeChat(req);
      return new Response(JSON.stringify(response), { headers: { 'content-type': JSON_TYPE, 'x-cost': microsToDecimal(costMicros), 'x-cost-final': 'true' } });
    }
    const stream = await router.openStream(req);
    const chunks = stream[Symbol.asyncIterator]();
    const sse = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { value, done } = await chunks.next();
        if (done) {
          controller.enqueue(encoder.encode('data: [DONE]\n\n'));
          controller.close();
          return;
        }
        controller.enqueue(encoder.encode(`data: ${rawJsonOf(value) ?? JSON.stringify(value)}\n\n`));
      },
      async cancel() {
        stream.abort();
        await chunks.return?.(undefined);
      },
    });
    return new Response(sse, {
      headers: {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        'x-accel-buffering': 'no',
        'x-cost': microsToDecimal(stream.headerCostMicros),
        'x-cost-final': 'false',
      },
    });
  }

  function models(caller: Caller) {
    limiter.enforce(caller.keyId ?? caller.userId, 1, 'too many requests for this API key');
    return { object: 'list', data: router.listModels().map((id) => ({ id, object: 'model', created: 0, owned_by: 'cpd' })) };
  }

  return { chat, models, maxBodyBytes: maxBody };
}

export type GatewayService = ReturnType<typeof createGatewayService>;

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
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import type { Caller } from '../../platform/http/auth';
import { namedLimiter } from '../../platform/http/rate-limit';
import { microsToDecimal } from '../../platform/money';
import { type Chunk, countPromptTokens } from '../metering';
import { type ChatCaller, type ChatRequest, type MessagesRequest, type RouterService, rawJsonOf } from '../router';
import { readBodyBytes } from '../../platform/http/body-limit';
import { JSON_TYPE } from '../../platform/http/errors';
import { assertBodyDepth } from '../../platform/http/json-depth';
import { ResponseAssembler } from './gateway.responses';
import { responsesRequestOf } from './gateway.responses.request';
import { createResponseStore } from './gateway.responses.store';
import { type AnthropicEvent, captureChunkOf, MessageAssembler } from './gateway.messages';
import { chatBodyOfMessages } from './gateway.messages.request';
import { type CaptureSink, type RequestCapture, captureFor } from './gateway.capture';
import { type ReplaySource, replayBody } from './gateway.replay';

type RouterRequest = ChatRequest & { caller: ChatCaller };
type Endpoint = 'chat' | 'embeddings' | 'responses' | 'messages';

/** captures: the captures module (absent: nothing is captured and replay is not offered). */
export function createGatewayService(ctx: AppContext, router: RouterService, captures?: CaptureSink & ReplaySource) {
  const limiter = namedLimiter(ctx, 'gateway');
  const maxBody = ctx.config.gateway.maxBodyBytes;
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const storedResponses = createResponseStore(ctx);

  async function readBody(request: Request): Promise<{ body: Record<string, unknown>; bytes: number }> {
    const raw = await readBodyBytes(request, maxBody);
    let body: unknown;
    try {
      body = JSON.parse(decoder.decode(raw));
    } catch {
      throw new AppError('invalid', 'request body is not valid JSON');
    }
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new AppError('invalid', 'the request body must be a JSON object');
    assertBodyDepth(body);
    return { body: body as Record<string, unknown>, bytes: raw.byteLength };
  }

  /** The per-key limit, then the body: the router request every endpoint starts from. */
  async function routerRequest(caller: Caller, request: Request, requestId: string | undefined): Promise<RouterRequest> {
    limiter.enforce(caller.keyId ?? caller.userId, 1, 'too many requests for this API key');
    const { body, bytes } = await readBody(request);
    return { caller: { userId: caller.userId, keyId: caller.keyId }, body, bodyBytes: bytes, signal: request.signal, requestId };
  }

  /**
   * Runs an endpoint with the request's capture, when it has one (gateway.capture.ts); a replay
   * (`replayOf`) has the entrypoint `replay`, is always captured and answers X-Replay-Of.
   */
  async function serve(endpoint: Endpoint, req: RouterRequest, replayOf: string | null, run: (req: RouterRequest, capture: RequestCapture | null) => Promise<Response>): Promise<Response> {
    const capture = await captureFor(ctx, captures, { ...req.caller, endpoint, body: req.body, bodyBytes: req.bodyBytes ?? 0, replayOf });
    const routed = replayOf || capture ? { ...req, ...(replayOf ? { entrypoint: 'replay' } : {}), ...(capture ? { onUsage: capture.onUsage } : {}) } : req;
    try {
      const res = await run(routed, capture);
      if (replayOf) {
        res.headers.set('x-replay-of', replayOf);
        // The replay's own capture, for the console's comparison.
        if (capture) res.headers.set('x-capture-id', capture.id);
      }
      return res;
    } catch (err) {
      capture?.failed(err);
      throw err;
    }
  }

  /** A JSON answer; its capture, if any, keeps the very text sent. */
  function jsonAnswer(body: unknown, costMicros: bigint, capture: RequestCapture | null) {
    const text = JSON.stringify(body);
    capture?.answered(text);
    return new Response(text, { headers: { 'content-type': JSON_TYPE, 'x-cost': microsToDecimal(costMicros), 'x-cost-final': 'true' } });
  }

  /**
   * An SSE answer: each item of the router's stream (chat chunks, or Messages API events) becomes
   * the frames `frames` makes of it; `end` closes the stream. A capture is told each item as a chat
   * chunk (`captured` makes one of an item that is not).
   */
  function sseAnswer<T>(
    stream: AsyncIterable<T> & { abort(): void; headerCostMicros: bigint },
    frames: (item: T) => string | Promise<string>,
    end: string,
    capture: RequestCapture | null,
    captured: (item: T) => Chunk | null = (item) => item as Chunk,
  ): Response {
    const chunks = stream[Symbol.asyncIterator]();
    const sse = new ReadableStream<Uint8Array>({
      // A pull that enqueues nothing would not be called again: read on until a chunk makes frames.
      async pull(controller) {
        for (;;) {
          const { value, done } = await chunks.next().catch((err) => {
            capture?.ended();
            throw err;
          });
          if (done) {
            capture?.ended();
            if (end) controller.enqueue(encoder.encode(end));
            controller.close();
            return;
          }
          const kept = capture ? captured(value) : null;
          if (kept) capture?.chunk(kept);
          const text = await frames(value);
          if (text) return controller.enqueue(encoder.encode(text));
        }
      },
      async cancel() {
        stream.abort();
        await chunks.return?.(undefined);
        capture?.ended();
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

  const runChat = (req: RouterRequest, replayOf: string | null) =>
    serve('chat', req, replayOf, async (req, capture) => {
      if (req.body.stream !== true) {
        const { response, costMicros } = await router.completeChat(req);
        return jsonAnswer(response, costMicros, capture);
      }
      const stream = await router.openStream(req);
      return sseAnswer(stream, (chunk) => `data: ${rawJsonOf(chunk) ?? JSON.stringify(chunk)}\n\n`, 'data: [DONE]\n\n', capture);
    });

  const runEmbeddings = (req: RouterRequest, replayOf: string | null) =>
    serve('embeddings', req, replayOf, async (req, capture) => {
      const { response, costMicros } = await router.embed(req);
      return jsonAnswer(response, costMicros, capture);
    });

  /** The Responses API, served through chat completions (see gateway.responses*.ts). */
  const runResponses = (req: RouterRequest, replayOf: string | null) => serve('responses', req, replayOf, (req, capture) => responsesAnswer(req, capture));

  /**
   * A Responses request: the conversation it continues (previous_response_id) comes from the
   * stored responses; the answer is stored (unless `store: false`) before its last event or its
   * JSON leaves, so the client can continue it at once, on any replica.
   */
  async function responsesAnswer(req: RouterRequest, capture: RequestCapture | null): Promise<Response> {
    const asked = req.body;
    const request = responsesRequestOf(asked);
    const userId = req.caller.userId;
    const history = request.previousResponseId ? await storedResponses.conversation(userId, request.previousResponseId) : [];
    const body = request.chatBody(history);
    // Admission bounds the prompt by the body's bytes: a continued conversation's are the chat body's, not the request's.
    const bodyBytes = history.length ? Math.max(req.bodyBytes ?? 0, Buffer.byteLength(JSON.stringify(body))) : req.bodyBytes;
    const chatReq = { ...req, body, bodyBytes };
    const keep = async (response: Record<string, unknown>) => {
      if (!request.store) return;
      // The answer is paid for and sent even if it cannot be kept; continuing it then answers 404.
      await storedResponses
        .save({ id: String(response.id), userId, previousResponseId: request.previousResponseId, input: request.input, response })
        .catch((err) => ctx.log.error({ err, response_id: response.id }, 'could not store a response'));
    };
    if (asked.stream !== true) {
      const { response, costMicros } = await router.completeChat(chatReq);
      const answer = new ResponseAssembler(asked, String(response.model ?? asked.model), request.customTools).fromCompletion(response);
      await keep(answer);
      return jsonAnswer(answer, costMicros, capture);
    }
    const stream = await router.openStream(chatReq);
    const assembler = new ResponseAssembler(asked, stream.model, request.customTools);
    const sse = (events: Array<{ type: string }>) => events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('');
    let started = false;
    return sseAnswer(
      stream,
      async (chunk) => {
        const head = started ? '' : sse(assembler.start());
        started = true;
        // The router's last chunk carries the usage (and cost) and no choices: it ends the response.
        if (chunk.usage && Array.isArray(chunk.choices) && chunk.choices.length === 0) {
          const events = assembler.finish(chunk.usage as Record<string, unknown>);
          await keep(events.at(-1)!.response as Record<string, unknown>);
          return head + sse(events);
        }
        return head + sse(assembler.chunk(chunk));
      },
      '',
      capture,
    );
  }

  /** GET /v1/responses/{id}: a stored response of the caller's. */
  function storedResponse(caller: Caller, id: string) {
    limiter.enforce(caller.keyId ?? caller.userId, 1, 'too many requests for this API key');
    return storedResponses.get(caller.userId, id);
  }

  /** DELETE /v1/responses/{id}: forgets a stored response of the caller's (it can no longer be continued). */
  function deleteResponse(caller: Caller, id: string) {
    limiter.enforce(caller.keyId ?? caller.userId, 1, 'too many requests for this API key');
    return storedResponses.remove(caller.userId, id);
  }

  /**
   * The Anthropic Messages API (POST /v1/messages): passed through to anthropic-format backends,
   * else translated to chat completions (gateway.messages*.ts); metered and billed like chat.
   * `headers`: the client's anthropic-version and anthropic-beta (a replay has none).
   */
  const runMessages = (req: RouterRequest, replayOf: string | null, headers: MessagesRequest['headers'] = {}) =>
    serve('messages', req, replayOf, (req, capture) => messagesAnswer(req, headers, capture));

  async function messagesAnswer(req: RouterRequest, headers: MessagesRequest['headers'], capture: RequestCapture | null): Promise<Response> {
    const message = req.body;
    const passThrough = typeof message.model === 'string' && router.messagesFormat(message.model) === 'anthropic';
    const chatBody = chatBodyOfMessages(message, { lenient: passThrough });
    if (passThrough) {
      const passed: MessagesRequest = { ...req, body: chatBody, message, headers };
      if (message.stream !== true) {
        const { response, costMicros } = await router.completeMessages(passed);
        return jsonAnswer(response, costMicros, capture);
      }
      const stream = await router.openMessages(passed);
      return sseAnswer(stream, (e) => `event: ${e.event}\ndata: ${e.raw}\n\n`, '', capture, (e) => captureChunkOf(e.event, e.data));
    }
    const chatReq = { ...req, body: chatBody };
    if (message.stream !== true) {
      const { response, costMicros } = await router.completeChat(chatReq);
      return jsonAnswer(new MessageAssembler(message, String(response.model ?? message.model)).fromCompletion(response), costMicros, capture);
    }
    const stream = await router.openStream(chatReq);
    const assembler = new MessageAssembler(message, stream.model);
    const sse = (events: AnthropicEvent[]) => events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('');
    let started = false;
    return sseAnswer(
      stream,
      (chunk: Chunk) => {
        const head = started ? '' : sse(assembler.start());
        started = true;
        // The router's last chunk carries the usage (and cost) and no choices: it ends the message.
        if (chunk.usage && Array.isArray(chunk.choices) && chunk.choices.length === 0) return head + sse(assembler.finish(chunk.usage as Record<string, unknown>));
        return head + sse(assembler.chunk(chunk));
      },
      '',
      capture,
    );
  }

  async function messages(caller: Caller, request: Request, requestId: string | undefined): Promise<Response> {
    const headers = { version: request.headers.get('anthropic-version') ?? undefined, beta: request.headers.get('anthropic-beta') ?? undefined };
    return runMessages(await routerRequest(caller, request, requestId), null, headers);
  }

  /**
   * POST /v1/messages/count_tokens: the prompt's tokens by cpd's own count (the same estimate that
   * bills a request whose backend reports no usage), each image at IMAGE_TOKENS. Free.
   */
  async function countTokens(caller: Caller, request: Request): Promise<Response> {
    limiter.enforce(caller.keyId ?? caller.userId, 1, 'too many requests for this API key');
    const { body } = await readBody(request);
    const chatBody = chatBodyOfMessages(body, { countOnly: true, lenient: true });
    if (!router.isModel(String(body.model))) throw new AppError('not_found', `model "${String(body.model)}" does not exist or is not available`);
    let images = 0;
    for (const m of chatBody.messages as Array<{ content?: unknown }>)
      if (Array.isArray(m.content)) images += m.content.filter((p) => (p as { type?: unknown }).type === 'image_url').length;
    const tokens = (await countPromptTokens(chatBody)) + images * ctx.config.imageTokens;
    return jsonAnswer({ input_tokens: tokens }, 0n, null);
  }

  const chat = async (caller: Caller, request: Request, requestId: string | undefined) => runChat(await routerRequest(caller, request, requestId), null);
  const embeddings = async (caller: Caller, request: Request, requestId: string | undefined) => runEmbeddings(await routerRequest(caller, request, requestId), null);
  const responses = async (caller: Caller, request: Request, requestId: string | undefined) => runResponses(await routerRequest(caller, request, requestId), null);
  const RUN: Record<Endpoint, (req: RouterRequest, replayOf: string) => Promise<Response>> = { chat: runChat, embeddings: runEmbeddings, responses: runResponses, messages: runMessages };

  /**
   * POST /v1/router/replay: runs a capture's request again through the same path as any request
   * (billed to the caller), on the original endpoint, optionally against another model or route.
   */
  async function replay(caller: Caller, request: Request, requestId: string | undefined): Promise<Response> {
    if (!captures) throw new AppError('not_found', 'replay is not available');
    const req = await routerRequest(caller, request, requestId);
    const { source, body } = await replayBody(captures, caller, req.body);
    return RUN[source.endpoint]({ ...req, body, bodyBytes: JSON.stringify(body).length }, source.id);
  }

  function models(caller: Caller) {
    limiter.enforce(caller.keyId ?? caller.userId, 1, 'too many requests for this API key');
    const ids = router.listModels();
    // OpenAI's list shape and Anthropic's together, so either SDK's models.list() reads it.
    return {
      object: 'list',
      data: ids.map((id) => ({ id, object: 'model', created: 0, owned_by: 'cpd', type: 'model', display_name: id, created_at: '1970-01-01T00:00:00Z' })),
      has_more: false,
      first_id: ids[0] ?? null,
      last_id: ids.at(-1) ?? null,
    };
  }

  return { chat, embeddings, responses, storedResponse, deleteResponse, messages, countTokens, replay, models, maxBodyBytes: maxBody, sweepResponses: storedResponses.sweep };
}

export type GatewayService = ReturnType<typeof createGatewayService>;

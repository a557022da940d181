/**
 * A local OpenAI-compatible model server for tests (DESIGN: outside systems are replaced by small
 * local servers that speak their real protocol). It listens on 127.0.0.1 port 0.
 *
 *   GET  /v1/models             {object: 'list', data: [{id, object: 'model', …}]}
 *   POST /v1/chat/completions   JSON, or SSE when `stream: true` (usage in a final chunk with
 *                               empty `choices` when `stream_options.include_usage` is true)
 *   POST /v1/embeddings         {object: 'list', data: [{object: 'embedding', index, embedding}], usage}:
 *                               each input's vector is [its index, its token count, 0.5]; a text's
 *                               tokens are its pieces (below), a token array's its length
 *
 * Usage:
 *   const up = await startFakeUpstream({ models: ['m1'] });
 *   // MODEL_BACKENDS=m1=${up.url}        (up.url ends in /v1)
 *   up.set({ content: 'one two three', promptTokens: 7 });        // every later request
 *   up.set((body) => (body.tools ? { toolCalls: [{ name: 'f', arguments: '{}' }] } : {}));
 *   up.requests[0].body                   // what the upstream received
 *   await waitFor(() => up.stats.streamsAborted === 1)
 *   const gate = Promise.withResolvers<void>();
 *   up.set({ hold: { afterFrames: 2, until: gate.promise } });   // pause a stream mid-way…
 *   gate.resolve();                                               // …until the test has looked
 *   await up.close();
 *   startFakeUpstream({ models: ['m1'], apiKey: 'sk-x' })   // 401 unless `Authorization: Bearer sk-x`
 *
 * Tokens are deterministic: the content is cut into pieces `/\S+\s*\/g` (a word and its trailing
 * space); each piece is one completion token and one stream chunk. prompt_tokens is
 * `promptTokens` (default 10) whatever the messages are.
 *
 * Like a real server it answers `n` choices (each the same answer; completion_tokens is the sum
 * over the choices, streamed chunk by chunk with each choice's `index`) and stops each choice at
 * `max_completion_tokens` (else `max_tokens`) tokens, reasoning included, with finish_reason
 * `length`. Reasoning (`reasoning`) comes first, as `reasoning_content` (DeepSeek, vLLM) or
 * `reasoning` (`reasoningField`); a refusal (`refusal`, OpenAI) or a legacy `function_call`
 * (`functionCall`) replaces the content.
 */

export interface FakeToolCall {
  id?: string;
  name: string;
  arguments: string;
}

export interface FakeBehaviour {
  /** Assistant text (default 'Hello from the fake upstream.': 5 pieces, so 5 completion tokens). */
  content: string;
  /** prompt_tokens reported in usage (default 10). */
  promptTokens: number;
  /**
   * Prompt tokens reported as served from the cache (default 0: none reported), as OpenAI and vLLM
   * report them (`prompt_tokens_details.cached_tokens`) or as Anthropic names them
   * (`cache_read_input_tokens`), per `cachedField`.
   */
  cachedTokens: number;
  cachedField: 'prompt_tokens_details' | 'cache_read_input_tokens';
  /** completion_tokens reported in usage; null = the number of pieces (default null). */
  completionTokens: number | null;
  /** Report usage: in the JSON body, and in a final stream chunk when asked for (default true). */
  usage: boolean;
  /** Answer 200 with a body that is neither OpenAI JSON nor SSE (default false). */
  garbage: boolean;
  /** Answer this HTTP status with an OpenAI error body instead of a completion (default null). */
  status: number | null;
  /** The error body's message with `status` (default null: `fake upstream status <status>`). */
  errorMessage: string | null;
  /** Delay before the response headers, in ms (default 0). */
  firstByteDelayMs: number;
  /** Delay between stream chunks, in ms (default 0). */
  chunkDelayMs: number;
  /**
   * The usage-only chunk and [DONE] follow the chunk before them at once, not chunkDelayMs later,
   * as a real server sends them once generation has ended (default false).
   */
  trailerAtOnce: boolean;
  /** Answer with these tool calls (finish_reason 'tool_calls') instead of content, after the reasoning if any (default null). */
  toolCalls: FakeToolCall[] | null;
  /**
   * Pause until `until` resolves or the client goes away (default null): before the response
   * headers when `afterFrames` is 0, else after that many stream frames. Tests that need a request
   * still running use this instead of a delay, so no timing window can close under load.
   */
  hold: { afterFrames: number; until: Promise<void> } | null;
  /** The finish reason sent; null = 'stop' (or 'tool_calls', 'function_call', 'length' as the answer ended) (default null). */
  finishReason: string | null;
  /** Reasoning text sent before the answer, one piece a chunk, each a completion token (default ''). */
  reasoning: string;
  /** The field reasoning comes in: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (default 'reasoning_content'). */
  reasoningField: 'reasoning_content' | 'reasoning';
  /** Answer with this refusal (OpenAI's `refusal` field, content null) instead of content (default null). */
  refusal: string | null;
  /** Answer with this legacy `function_call` (finish_reason 'function_call') instead of content (default null). */
  functionCall: { name: string; arguments: string } | null;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Record<string, any> | null;
}

export interface FakeUpstream {
  /** OpenAI base URL, `http://127.0.0.1:PORT/v1`. */
  url: string;
  port: number;
  /** Changes the behaviour for later requests: fields to merge, or a function of the request body. */
  set(b: Partial<FakeBehaviour> | ((body: Record<string, any>) => Partial<FakeBehaviour>)): void;
  /** Back to the defaults and the constructor's behaviour; clears requests and stats. */
  reset(): void;
  /** Every request received, oldest first (GET /v1/models included). */
  requests: RecordedRequest[];
  /**
   * requestsAborted: completions whose client went away before the answer (JSON or before a
   * stream's headers); streamsPeak: the most streams open at once.
   */
  stats: { completions: number; embeddings: number; requestsAborted: number; streamsStarted: number; streamsCompleted: number; streamsAborted: number; streamsPeak: number };
  close(): Promise<void>;
}

export const FAKE_DEFAULTS: FakeBehaviour = {
  content: 'Hello from the fake upstream.',
  promptTokens: 10,
  cachedTokens: 0,
  cachedField: 'prompt_tokens_details',
  completionTokens: null,
  usage: true,
  garbage: false,
  status: null,
  errorMessage: null,
  firstByteDelayMs: 0,
  chunkDelayMs: 0,
  trailerAtOnce: false,
  toolCalls: null,
  hold: null,
  finishReason: null,
  reasoning: '',
  reasoningField: 'reasoning_content',
  refusal: null,
  functionCall: null,
};

/** Resolves when `gate` opens or the client goes away, whichever comes first. */
function heldUntil(gate: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return Promise.race([gate, new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))]);
}

export function piecesOf(content: string): string[] {
  return content.match(/\S+\s*/g) ?? [];
}

type BehaviourSource = Partial<FakeBehaviour> | ((body: Record<string, any>) => Partial<FakeBehaviour>);

export async function startFakeUpstream(
  /** apiKey: like a hosted provider, every request must carry `Authorization: Bearer <apiKey>` (else 401). */
  opts: { models?: string[]; behaviour?: BehaviourSource; apiKey?: string } = {},
): Promise<FakeUpstream> {
  const models = opts.models ?? ['fake-model'];
  let source: BehaviourSource = opts.behaviour ?? {};
  let seq = 0;
  const requests: RecordedRequest[] = [];
  const stats = { completions: 0, embeddings: 0, requestsAborted: 0, streamsStarted: 0, streamsCompleted: 0, streamsAborted: 0, streamsPeak: 0 };
  let streamsOpen = 0;

  const behaviourFor = (body: Record<string, any>): FakeBehaviour => ({
    ...FAKE_DEFAULTS,
    ...(typeof source === 'function' ? source(body) : source),
  });

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      const text = req.method === 'POST' ? await req.text() : '';
      let body: Record<string, any> | null = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {}
      requests.push({ method: req.method, path, headers: Object.fromEntries(req.headers), body });
      if (opts.apiKey !== undefined && req.headers.get('authorization') !== `Bearer ${opts.apiKey}`)
        return Response.json({ error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } }, { status: 401 });

      if (req.method === 'GET' && path === '/v1/models') {
        return Response.json({ object: 'list', data: models.map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'fake' })) });
      }
      if (req.method === 'POST' && path === '/v1/embeddings') {
        stats.embeddings++;
        const b = behaviourFor(body ?? {});
        if (b.status !== null) return Response.json({ error: { message: `fake upstream status ${b.status}`, type: 'server_error' } }, { status: b.status });
        if (!body || body.input === undefined) return Response.json({ error: { message: 'input required', type: 'invalid_request_error' } }, { status: 400 });
        return Response.json(embeddingsOf(body, b));
      }
      if (req.method !== 'POST' || path !== '/v1/chat/completions') return Response.json({ error: { message: 'not found' } }, { status: 404 });
      if (!body || !Array.isArray(body.messages)) return Response.json({ error: { message: 'messages required', type: 'invalid_request_error' } }, { status: 400 });

      stats.completions++;
      const b = behaviourFor(body);
      const n = ++seq;
      if (b.firstByteDelayMs > 0) await Bun.sleep(b.firstByteDelayMs);
      if (b.hold?.afterFrames === 0) await heldUntil(b.hold.until, req.signal);
      if (req.signal.aborted) {
        stats.requestsAborted++;
        return new Response(null, { status: 499 });
      }
      if (b.status !== null) return Response.json({ error: { message: b.errorMessage ?? `fake upstream status ${b.status}`, type: 'server_error' } }, { status: b.status });
      if (b.garbage) return new Response('<html>502 Bad Gateway from some proxy</html>', { headers: { 'content-type': 'text/html' } });
      return body.stream === true ? streamResponse(body, b, n, req.signal) : Response.json(completion(body, b, n));
    },
  });

  function streamResponse(body: Record<string, any>, b: FakeBehaviour, n: number, signal: AbortSignal): Response {
    stats.streamsStarted++;
    stats.streamsPeak = Math.max(stats.streamsPeak, ++streamsOpen);
    const frames = chunksFor(body, b, n);
    const enc = new TextEncoder();
    let i = 0;
    let finished = false;
    const abort = () => {
      if (!finished) {
        finished = true;
        streamsOpen--;
        stats.streamsAborted++;
      }
    };
    signal.addEventListener('abort', abort);
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const trailer = i >= frames.length || (frames[i]!.choices as unknown[]).length === 0;
        if (i > 0 && b.chunkDelayMs > 0 && !(b.trailerAtOnce && trailer)) await Bun.sleep(b.chunkDelayMs);
        if (i > 0 && i === b.hold?.afterFrames) await heldUntil(b.hold.until, signal);
        if (finished) return;
        if (i < frames.length) {
          controller.enqueue(enc.encode(`data: ${JSON.stringify(frames[i++])}\n\n`));
          return;
        }
        controller.enqueue(enc.encode('data: [DONE]\n\n'));
        finished = true;
        streamsOpen--;
        stats.streamsCompleted++;
        signal.removeEventListener('abort', abort);
        controller.close();
      },
      cancel: abort,
    });
    return new Response(stream, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
  }

  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    port: server.port!,
    set(b) {
      if (typeof b === 'function' || typeof source === 'function') source = b;
      else source = { ...source, ...b };
    },
    reset() {
      source = opts.behaviour ?? {};
      requests.length = 0;
      Object.assign(stats, { completions: 0, embeddings: 0, requestsAborted: 0, streamsStarted: 0, streamsCompleted: 0, streamsAborted: 0, streamsPeak: 0 });
    },
    requests,
    stats,
    close: () => server.stop(true),
  };
}

function usageOf(b: FakeBehaviour, answers: Answer[]) {
  const completion = b.completionTokens ?? answers.reduce((sum, a) => sum + a.tokens, 0);
  const reasoning = answers.reduce((sum, a) => sum + a.reasoning.length, 0);
  return {
    prompt_tokens: b.promptTokens,
    completion_tokens: completion,
    total_tokens: b.promptTokens + completion,
    ...(reasoning ? { completion_tokens_details: { reasoning_tokens: reasoning } } : {}),
    ...(b.cachedTokens
      ? b.cachedField === 'prompt_tokens_details'
        ? { prompt_tokens_details: { cached_tokens: b.cachedTokens } }
        : { cache_read_input_tokens: b.cachedTokens }
      : {}),
  };
}

function toolCallsOf(b: FakeBehaviour, n: number) {
  return (b.toolCalls ?? []).map((c, i) => ({
    id: c.id ?? `call_${n}_${i}`,
    type: 'function' as const,
    function: { name: c.name, arguments: c.arguments },
  }));
}

/** One choice's answer: its reasoning and text pieces (cut at the request's maximum), calls, tokens and finish reason. */
interface Answer {
  reasoning: string[];
  text: string[];
  tools: ReturnType<typeof toolCallsOf> | null;
  tokens: number;
  finish: string;
}

/** The request's `n` (at least 1) and its per-choice maximum (max_completion_tokens, else max_tokens), as vLLM reads them. */
function asked(body: Record<string, any>) {
  const int = (v: unknown) => (Number.isInteger(v) && (v as number) > 0 ? (v as number) : null);
  return { n: int(body.n) ?? 1, max: int(body.max_completion_tokens) ?? int(body.max_tokens) ?? Number.POSITIVE_INFINITY };
}

function answerOf(body: Record<string, any>, b: FakeBehaviour, n: number): Answer {
  const { max } = asked(body);
  if (b.toolCalls || b.functionCall) {
    const tools = b.toolCalls ? toolCallsOf(b, n) : null;
    // A reasoning model thinks before it calls (DeepSeek, vLLM reasoning parsers): the reasoning comes first.
    const reasoning = tools ? piecesOf(b.reasoning).slice(0, Math.max(0, max - tools.length)) : [];
    return { reasoning, text: [], tools, tokens: reasoning.length + (tools ? tools.length : 1), finish: b.finishReason ?? (tools ? 'tool_calls' : 'function_call') };
  }
  const reasoning = piecesOf(b.reasoning).slice(0, max);
  const all = piecesOf(b.refusal ?? b.content);
  const text = all.slice(0, Math.max(0, max - reasoning.length));
  const cut = reasoning.length < piecesOf(b.reasoning).length || text.length < all.length;
  return { reasoning, text, tools: null, tokens: reasoning.length + text.length, finish: b.finishReason ?? (cut ? 'length' : 'stop') };
}

function completion(body: Record<string, any>, b: FakeBehaviour, n: number) {
  const answer = answerOf(body, b, n);
  const reasoning = answer.reasoning.length ? { [b.reasoningField]: answer.reasoning.join('') } : {};
  const text = answer.text.join('');
  const message = answer.tools
    ? { role: 'assistant', content: null, tool_calls: answer.tools, ...reasoning }
    : b.functionCall
      ? { role: 'assistant', content: null, function_call: b.functionCall }
      : b.refusal !== null
        ? { role: 'assistant', content: null, refusal: text, ...reasoning }
        : { role: 'assistant', content: text, ...reasoning };
  const choices = Array.from({ length: asked(body).n }, (_, index) => ({ index, message, logprobs: null, finish_reason: answer.finish }));
  return {
    id: `chatcmpl-fake-${n}`,
    object: 'chat.completion',
    created: 1700000000,
    model: body.model,
    choices,
    ...(b.usage ? { usage: usageOf(b, choices.map(() => answer)) } : {}),
  };
}

/** One choice's deltas in order: reasoning pieces, then text (or refusal) pieces, or its calls. */
function deltasOf(answer: Answer, b: FakeBehaviour): Record<string, unknown>[] {
  if (answer.tools) return [{ role: 'assistant', content: null }, ...answer.reasoning.map((p) => ({ [b.reasoningField]: p })), ...answer.tools.map((t, i) => ({ tool_calls: [{ index: i, ...t }] }))];
  if (b.functionCall) return [{ role: 'assistant', content: null, function_call: { name: b.functionCall.name, arguments: '' } }, ...piecesOf(b.functionCall.arguments).map((p) => ({ function_call: { arguments: p } }))];
  const field = b.refusal !== null ? 'refusal' : 'content';
  const deltas = [...answer.reasoning.map((p) => ({ [b.reasoningField]: p })), ...answer.text.map((p) => ({ [field]: p }))];
  if (deltas.length) deltas[0] = { role: 'assistant', ...deltas[0] };
  return deltas;
}

/** The stream's chunks: the choices' deltas interleaved (each chunk one choice, as vLLM sends them), their finish chunks, then usage. */
function chunksFor(body: Record<string, any>, b: FakeBehaviour, n: number): Record<string, unknown>[] {
  const base = { id: `chatcmpl-fake-${n}`, object: 'chat.completion.chunk', created: 1700000000, model: body.model };
  const wantsUsage = body.stream_options?.include_usage === true && b.usage;
  const extra = wantsUsage ? { usage: null } : {};
  const answer = answerOf(body, b, n);
  const choices = asked(body).n;
  const deltas = deltasOf(answer, b);
  const frames: Record<string, unknown>[] = [];
  for (const delta of deltas)
    for (let index = 0; index < choices; index++) frames.push({ ...base, choices: [{ index, delta, finish_reason: null }], ...extra });
  for (let index = 0; index < choices; index++) frames.push({ ...base, choices: [{ index, delta: {}, finish_reason: answer.finish }], ...extra });
  if (wantsUsage) frames.push({ ...base, choices: [], usage: usageOf(b, Array.from({ length: choices }, () => answer)) });
  return frames;
}

function embeddingsOf(body: Record<string, any>, b: FakeBehaviour) {
  const input = body.input;
  const items: Array<string | number[]> = typeof input === 'string' || (Array.isArray(input) && typeof input[0] === 'number') ? [input] : input;
  const tokens = items.map((x) => (typeof x === 'string' ? piecesOf(x).length : x.length));
  const total = tokens.reduce((a, n) => a + n, 0);
  return {
    object: 'list',
    model: body.model,
    // base64 (what the openai client asks for by default): the float32 vector's little-endian bytes.
    data: items.map((_, i) => {
      const vector = [i, tokens[i]!, 0.5];
      return { object: 'embedding', index: i, embedding: body.encoding_format === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector };
    }),
    ...(b.usage ? { usage: { prompt_tokens: total, total_tokens: total } } : {}),
  };
}

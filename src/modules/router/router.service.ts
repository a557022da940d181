/**
 * The router: resolves what the caller asked for (a model slug or a route name) to candidate
 * (model, backend) pairs, admits the request against the wallet, tries the candidates in order
 * until one produces output (failover before the first byte), meters the result and queues the
 * usage row with its wallet debit. The gateway and the agents module both call it.
 */
import type { AppContext } from '../../platform/context';
import { AppError, STATUS_OF_KIND } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { toMajor } from '../../platform/money';
import { type Ticket, createAdmission } from './router.admission';
import { type Backend, type BackendOptions, createBackendSet } from './router.backends';
import { type BackendInput, createAdminBackends } from './router.backends.admin';
import { type Price, costOf, estimateCost, usdConverter } from './router.pricing';
import { countCompletionTokens, countPromptTokens, countText, loadTokenizer } from './router.tokens';
import { AttemptError, type AttemptControl, type Chunk, type Upstream, attemptController, completeOnce, openStreamOnce } from './router.upstream';
import { type UsageDebitor, type UsageRecord, createUsageWriter } from './router.usage';

export interface RouterDeps {
  pricing: { priceOf(slug: string): Price | null };
  billing: UsageDebitor & {
    getBalanceMicros(userId: string): Promise<bigint>;
    onBalanceChange(listener: (userId: string) => void, resync: () => void): Promise<void>;
  };
}

export interface ChatCaller {
  userId: string;
  keyId: string | null;
}

export interface ChatRequest {
  /** null: an unbilled open agent call (usage row with no user, reported as `anonymous`; no debit). */
  caller: ChatCaller | null;
  body: Record<string, unknown>;
  /** Aborts the upstream request (the client went away). */
  signal?: AbortSignal;
  /** Size of the request as received, for the admission estimate; defaults to the JSON length. */
  bodyBytes?: number;
  requestId?: string;
}

/** An opened stream: headers may be sent; iterate for chunks (the last carries usage and cost). */
export interface ChatStream extends AsyncIterable<Chunk> {
  model: string;
  /** The cost known when the first token arrived (prompt + first chunk); the final chunk has the definitive one. */
  headerCostMicros: bigint;
  /** Stops the upstream request; the stream then ends and bills what was delivered. */
  abort(): void;
}

interface Candidate {
  slug: string;
  price: Price;
}

interface Plan {
  entrypoint: string;
  candidates: Candidate[];
  estimateMicros: bigint;
}

interface Served {
  candidate: Candidate;
  backend: Backend;
  control: AttemptControl;
}

interface UsageCounts {
  prompt: number;
  completion: number;
  counted: boolean;
}

const CLIENT_CLOSED = 499;

function validUsage(u: unknown): u is { prompt_tokens: number; completion_tokens: number } {
  const x = u as { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
  return !!x && Number.isInteger(x.prompt_tokens) && Number.isInteger(x.completion_tokens) && (x.prompt_tokens as number) >= 0 && (x.completion_tokens as number) >= 0;
}

/** Text and tool-call text of a completion message or a chunk's deltas. */
function outputText(parts: Array<{ content?: unknown; tool_calls?: unknown } | undefined>): { text: string; tools: string } {
  let text = '';
  let tools = '';
  for (const p of parts) {
    if (!p) continue;
    if (typeof p.content === 'string') text += p.content;
    if (Array.isArray(p.tool_calls))
      for (const c of p.tool_calls as Array<{ function?: { name?: unknown; arguments?: unknown } }>) {
        if (typeof c.function?.name === 'string') tools += c.function.name;
        if (typeof c.function?.arguments === 'string') tools += c.function.arguments;
      }
  }
  return { text, tools };
}

function deltasOf(chunk: Chunk) {
  return ((chunk.choices as Array<{ delta?: { content?: unknown; tool_calls?: unknown } }>) ?? []).map((c) => c.delta);
}

export function validateChatBody(body: unknown): asserts body is Record<string, unknown> {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new AppError('invalid', 'the request body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '') throw new AppError('invalid', 'model is required (a string)');
  if (!Array.isArray(b.messages) || b.messages.length === 0) throw new AppError('invalid', 'messages is required (a non-empty array)');
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw new AppError('invalid', 'stream must be a boolean');
}

export function createRouterService(ctx: AppContext, deps: RouterDeps) {
  const settings = ctx.config.router;
  const backends = createBackendSet(settings, ctx.log);
  for (const [slug, configured] of Object.entries(ctx.config.modelBackends))
    for (const { url, apiKey } of configured) backends.register(slug, url, { source: 'env', apiKey });
  const adminBackends = createAdminBackends(ctx, backends, new Set(settings.routes.keys()));
  const admission = createAdmission(deps.billing, ctx.log, settings.admissionWaitMs);
  const usage = createUsageWriter(ctx, deps.billing, admission.committed);
  const toUsd = usdConverter(ctx.config.site, ctx.config.usdPerCny);
  const stopProbing = backends.startProbing();
  // Loads the tokenizer's tables off the start-up path, before the first request is likely to need them.
  const preload = setTimeout(() => void loadTokenizer(), 1000);
  preload.unref?.();
  ctx.onShutdown(async () => {
    clearTimeout(preload);
    stopProbing();
    await usage.close();
  });

  function plan(body: Record<string, unknown>, bodyBytes: number): Plan {
    const asked = body.model as string;
    const route = settings.routes.get(asked);
    const priced = (slug: string): Candidate | null => {
      const price = deps.pricing.priceOf(slug);
      return price ? { slug, price } : null;
    };
    let candidates: Candidate[];
    if (route) {
      const pricedModels = route.models.map(priced).filter((c): c is Candidate => c !== null);
      if (!pricedModels.length) throw new AppError('not_found', `route "${asked}" has no priced model`);
      candidates = pricedModels.filter((c) => backends.has(c.slug));
      if (!candidates.length) throw new AppError('unavailable', `no backend serves route "${asked}"`);
      if (route.strategy === 'cheapest') {
        const est = new Map(candidates.map((c) => [c.slug, estimateCost(c.price, bodyBytes, body)]));
        candidates.sort((a, b) => (est.get(a.slug)! < est.get(b.slug)! ? -1 : est.get(a.slug)! > est.get(b.slug)! ? 1 : 0));
      } else if (route.strategy === 'least-loaded') {
        candidates.sort((a, b) => backends.load(a.slug) - backends.load(b.slug));
      }
    } else {
      const c = priced(asked);
      if (!c) throw new AppError('not_found', `model "${asked}" does not exist or is not available`);
      if (!backends.has(asked)) throw new AppError('unavailable', `no backend serves model "${asked}"`);
      candidates = [c];
    }
    let estimateMicros = 0n;
    for (const c of candidates) {
      const e = estimateCost(c.price, bodyBytes, body);
      if (e > estimateMicros) estimateMicros = e;
    }
    return { entrypoint: asked, candidates, estimateMicros };
  }

  /** Tries each candidate model's backends in order; on success the backend stays counted in flight until release(). */
  async function failover<T>(p: Plan, signal: AbortSignal | undefined, attempt: (upstream: Upstream, slug: string, control: AttemptControl) => Promise<T>): Promise<{ served: Served; result: T }> {
    let last: AttemptError | null = null;
    let answered = false;
    for (const candidate of p.candidates) {
      for (const backend of backends.candidates(candidate.slug)) {
        const control = attemptController(signal);
        backend.inflight++;
        try {
          const result = await attempt(backend, candidate.slug, control);
          backends.markOk(backend);
          return { served: { candidate, backend, control }, result };
        } catch (err) {
          backend.inflight--;
          control.dispose();
          const e = err instanceof AttemptError ? err : new AttemptError('upstream', String(err));
          if (e.reason === 'aborted') throw new AppError('unavailable', 'the request was aborted');
          if (e.reason === 'invalid') throw new AppError('invalid', `upstream refused the request: ${e.message}`);
          backends.markFailed(backend, e.message);
          last = e;
          answered ||= e.reason === 'upstream';
        }
      }
    }
    if (answered) throw new AppError('upstream', `bad upstream answer: ${last?.message}`);
    throw new AppError('unavailable', `no upstream available: ${last?.message ?? 'no backend'}`);
  }

  function release(s: Served) {
    s.backend.inflight--;
    s.control.dispose();
  }

  function payloadFor(body: Record<string, unknown>, slug: string, stream: boolean): string {
    // completeChat given stream: true (a library caller) still gets one JSON answer.
    if (!stream) return JSON.stringify(body.stream === true ? { ...body, model: slug, stream: false, stream_options: undefined } : { ...body, model: slug });
    const options = body.stream_options && typeof body.stream_options === 'object' ? body.stream_options : {};
    return JSON.stringify({ ...body, model: slug, stream: true, stream_options: { ...options, include_usage: true } });
  }

  /** Ends a request's accounting: the reservation becomes a queued debit and the usage row is queued. */
  async function meter(
    req: ChatRequest,
    ticket: Ticket | null,
    row: { entrypoint: string; model: string; backend: string | null; counts: UsageCounts; costMicros: bigint; status: number; streamed: boolean; aborted: boolean; started: number },
  ) {
    const { costMicros } = row;
    ticket?.settle(costMicros);
    const record: UsageRecord = {
      id: newId('use'),
      createdAt: ctx.clock.now(),
      userId: req.caller?.userId ?? null,
      keyId: req.caller?.keyId ?? null,
      entrypoint: row.entrypoint,
      model: row.model,
      backend: row.backend,
      promptTokens: row.counts.prompt,
      completionTokens: row.counts.completion,
      costMicros,
      costUsdMicros: toUsd(costMicros),
      tokensCounted: row.counts.counted,
      latencyMs: Math.round(performance.now() - row.started),
      status: row.status,
      streamed: row.streamed,
      aborted: row.aborted,
      requestId: req.requestId ?? null,
    };
    await usage.enqueue(record);
  }

  const statusOf = (err: unknown) => (err instanceof AppError ? STATUS_OF_KIND[err.kind] : 500);

  /** Validation, routing plan and wallet admission; latency is measured from here. */
  async function begin(req: ChatRequest) {
    const started = performance.now();
    validateChatBody(req.body);
    const bodyBytes = req.bodyBytes ?? JSON.stringify(req.body).length;
    const p = plan(req.body, bodyBytes);
    const ticket = req.caller ? await admission.admit(req.caller.userId, p.estimateMicros, req.signal) : null;
    return { p, ticket, started };
  }

  async function failed(req: ChatRequest, ticket: Ticket | null, p: Plan, started: number, streamed: boolean, err: unknown): Promise<never> {
    const aborted = req.signal?.aborted === true;
    await meter(req, ticket, {
      entrypoint: p.entrypoint,
      model: p.candidates[0]!.slug,
      backend: null,
      counts: { prompt: 0, completion: 0, counted: false },
      costMicros: 0n,
      status: aborted ? CLIENT_CLOSED : statusOf(err),
      streamed,
      aborted,
      started,
    });
    throw err;
  }

  async function completeChat(req: ChatRequest): Promise<{ response: Chunk; costMicros: bigint }> {
    const { p, ticket, started } = await begin(req);
    let served: Served;
    let response: Chunk;
    try {
      ({ served, result: response } = await failover(p, req.signal, (upstream, slug, control) => completeOnce(upstream, payloadFor(req.body, slug, false), control, settings.firstByteTimeoutMs)));
    } catch (err) {
      return failed(req, ticket, p, started, false, err);
    }
    release(served);
    let counts: UsageCounts;
    if (validUsage(response.usage)) counts = { prompt: response.usage.prompt_tokens, completion: response.usage.completion_tokens, counted: false };
    else {
      const out = outputText(((response.choices as Array<{ message?: { content?: unknown; tool_calls?: unknown } }>) ?? []).map((c) => c.message));
      counts = { prompt: await countPromptTokens(req.body), completion: await countCompletionTokens(out.text, out.tools), counted: true };
    }
    const costMicros = costOf(served.candidate.price, counts.prompt, counts.completion);
    const base = validUsage(response.usage) ? (response.usage as Record<string, unknown>) : { prompt_tokens: counts.prompt, completion_tokens: counts.completion, total_tokens: counts.prompt + counts.completion };
    response.usage = { ...base, cost: toMajor(costMicros) };
    await meter(req, ticket, { entrypoint: p.entrypoint, model: served.candidate.slug, backend: served.backend.url, counts, costMicros, status: 200, streamed: false, aborted: false, started });
    return { response, costMicros };
  }

  /** Opens a stream: failover and admission happen here, so an error is thrown before any chunk. */
  async function openStream(req: ChatRequest): Promise<ChatStream> {
    const { p, ticket, started } = await begin(req);
    let served: Served;
    let opened: Awaited<ReturnType<typeof openStreamOnce>>;
    try {
      ({ served, result: opened } = await failover(p, req.signal, (url, slug, control) =>
        openStreamOnce(url, payloadFor(req.body, slug, true), control, { connectMs: settings.connectTimeoutMs, firstByteMs: settings.firstByteTimeoutMs }),
      ));
    } catch (err) {
      return failed(req, ticket, p, started, true, err);
    }
    const { candidate, backend, control } = served;
    const promptCount = await countPromptTokens(req.body);
    const firstOut = outputText(opened.head.flatMap(deltasOf));
    const headerCostMicros = costOf(candidate.price, promptCount, (await countText(firstOut.text)) + (await countText(firstOut.tools)));

    let finished = false;
    async function finish(outcome: 'done' | 'client' | 'upstream', upstreamUsage: unknown, text: string, tools: string): Promise<{ counts: UsageCounts; cost: bigint }> {
      finished = true;
      release(served);
      let counts: UsageCounts;
      if (outcome === 'done' && validUsage(upstreamUsage)) counts = { prompt: upstreamUsage.prompt_tokens, completion: upstreamUsage.completion_tokens, counted: false };
      else {
        const reportedPrompt = validUsage(upstreamUsage) ? upstreamUsage.prompt_tokens : null;
        counts = { prompt: reportedPrompt ?? promptCount, completion: await countCompletionTokens(text, tools), counted: true };
      }
      // Billed for what was delivered: nothing when no token reached the client.
      const delivered = text !== '' || tools !== '' || outcome === 'done';
      const cost = delivered ? costOf(candidate.price, counts.prompt, counts.completion) : 0n;
      const status = outcome === 'done' ? 200 : outcome === 'client' ? CLIENT_CLOSED : 502;
      await meter(req, ticket, { entrypoint: p.entrypoint, model: candidate.slug, backend: backend.url, counts, costMicros: cost, status, streamed: true, aborted: outcome !== 'done', started });
      return { counts, cost };
    }

    async function* chunks(): AsyncGenerator<Chunk> {
      let text = '';
      let tools = '';
      let upstreamUsage: unknown = null;
      let usageChunk: Chunk | null = null;
      let template: Chunk = opened.head[0]!;
      // Holds back the upstream's usage-only chunk: the client gets it last, with the cost added.
      const take = (chunk: Chunk): Chunk | null => {
        template = chunk;
        if (chunk.usage) upstreamUsage = chunk.usage;
        const choices = chunk.choices;
        if (chunk.usage && (!Array.isArray(choices) || choices.length === 0)) {
          usageChunk = chunk;
          return null;
        }
        const out = outputText(deltasOf(chunk));
        text += out.text;
        tools += out.tools;
        return chunk;
      };
      let outcome: 'done' | 'client' | 'upstream' = 'done';
      let ended = false;
      try {
        for (const c of opened.head) {
          const out = take(c);
          if (out) yield out;
        }
        for (;;) {
          const { value, done } = await opened.rest.next();
          if (done) break;
          const out = take(value);
          if (out) yield out;
        }
        ended = true;
      } catch (err) {
        ended = true;
        const reason = control.signal.reason;
        outcome = control.signal.aborted && reason instanceof AttemptError && reason.reason === 'aborted' ? 'client' : 'upstream';
        if (outcome === 'upstream') {
          ctx.log.warn({ msg: 'upstream stream broke', model: candidate.slug, backend: backend.url, error: (err as Error).message });
          backends.markFailed(backend, (err as Error).message);
        }
      } finally {
        // Not ended: the consumer stopped iterating (return()), i.e. the client went away.
        if (!ended || outcome === 'client') {
          control.abort(new AttemptError('aborted', 'client went away'));
          await finish('client', upstreamUsage, text, tools);
        }
      }
      if (finished) return;
      const { counts, cost } = await finish(outcome, upstreamUsage, text, tools);
      const base = usageChunk ?? { id: template.id, object: 'chat.completion.chunk', created: template.created, model: template.model ?? candidate.slug, choices: [] };
      const reported = outcome === 'done' && validUsage(upstreamUsage) ? (upstreamUsage as Record<string, unknown>) : {};
      yield { ...base, usage: { ...reported, prompt_tokens: counts.prompt, completion_tokens: counts.completion, total_tokens: counts.prompt + counts.completion, cost: toMajor(cost) } };
    }

    const iterator = chunks();
    return {
      model: candidate.slug,
      headerCostMicros,
      abort: () => control.abort(new AttemptError('aborted', 'client went away')),
      [Symbol.asyncIterator]: () => iterator,
    };
  }

  /** streamChat for callers that only iterate: throws AppError at the first next() when nothing can serve. */
  async function* streamChat(req: ChatRequest): AsyncGenerator<Chunk> {
    const s = await openStream(req);
    try {
      yield* s;
    } finally {
      s.abort();
    }
  }

  /** Model ids the gateway lists: priced models with a backend, and routes with at least one. */
  function listModels(): string[] {
    const servable = (slug: string) => backends.has(slug) && deps.pricing.priceOf(slug) !== null;
    const models = backends.models().filter(servable);
    const routes = [...settings.routes.values()].filter((r) => r.models.some(servable)).map((r) => r.name);
    return [...models.sort(), ...routes];
  }

  return {
    completeChat,
    openStream,
    streamChat,
    listModels,
    registerBackend: (slug: string, baseUrl: string, opts?: BackendOptions) => backends.register(slug, baseUrl, opts),
    listBackends: backends.list,
    /** PUT /api/admin/router/backends: replaces the admin-managed set on every process; answers the whole list. */
    async replaceBackends(input: BackendInput[]) {
      await adminBackends.replace(input);
      return backends.list();
    },
    /** Probes every backend now (tests; the periodic probe runs on its own). */
    probeBackends: backends.probeAll,
    /** Resolves when every usage row queued so far is committed (tests, reports that must see the latest). */
    flushUsage: () => usage.flush(),
    /** Resolves once cross-process balance invalidation listens and the admin-managed backends are loaded and followed. */
    ready: () => Promise.all([admission.ready, adminBackends.load()]).then(() => {}),
  };
}

export type RouterService = ReturnType<typeof createRouterService>;

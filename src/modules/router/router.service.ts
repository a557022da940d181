/**
 * The router: resolves what the caller asked for (a model slug or a route name) to candidate
 * (model, backend) pairs, and takes every request down one path:
 *
 *   admit (an upper bound of the cost held against the wallet and the key, or less with a
 *          completion allowance the request is then held to)
 *   → call (the candidates in order until one produces output: failover before the first byte)
 *   → meter (what was used, metering.meter.ts; the completion billed clamped to the request's maximum)
 *   → commit (the usage row and its debit, durable before the answer ends; then the hold ends).
 *
 * The gateway and the agents module call it; other entry points use `metering` for the same path.
 */
import { join } from 'node:path';
import type { Grant, GrantAnswer, GrantRequest } from '../billing';
import type { AppContext } from '../../app-context';
import type { RowOutcome } from '../../platform/db';
import { DRAIN_DEADLINE_MS } from '../../platform/context';
import { AppError, CLIENT_CLOSED_REQUEST, STATUS_OF_KIND } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { toMajor } from '../../platform/money';
import { type Chunk, type EstimateSettings, type KeyEvents, type KeyLimitsSource, type Need, type Price, type StreamOutcome, type Ticket, type UsageCounts, type UsageDebitor, type UsageRecord, addGenerated, completionCounts, costOf, countGenerated, countPromptTokens, createAdmission, createKeyLimits, createStreamMeter, createUsageWriter, deltasOf, estimateCost, loadTokenizer, minimumCost, noneGenerated, requestBound, completionWithin, usdConverter } from '../metering';
import { type BackendOptions, createBackendSet } from './router.backends';
import { type BackendInput, createAdminBackends } from './router.backends.admin';
import { createEmbeddings, estimateEmbeddingCost, validateEmbeddingsBody } from './router.embeddings';
import { leaseBackend } from './router.lease';
import { createRouterMetrics } from './router.metrics';
import type { Admitted, Candidate, ChatRequest, ChatStream, Metered, Plan, RequestKind, Served } from './router.types';
import { AttemptError, type AttemptControl, type Upstream, completeOnce, deadlineError, openStreamOnce } from './router.upstream';

export interface RouterDeps {
  /** The price of a model slug for a user (their price group's multiplier applied; none: ×1). */
  pricing: { priceOf(slug: string, userId?: string | null): Price | null };
  /** The accounts module's key limits lookup. */
  keyLimitsOf: KeyLimitsSource;
  /** Where key.spend_limit_reached is recorded (the webhooks module's event sink). */
  keyEvents?: KeyEvents;
  billing: UsageDebitor & {
    grants: {
      request(req: GrantRequest): Promise<GrantAnswer>;
      endMargin(userId: string, holder: string): Promise<Grant | null>;
      giveBack(userId: string, holder: string, version: number): Promise<void>;
      renewAll(holder: string, ttlMs: number): Promise<void>;
      releaseAll(holder: string): Promise<void>;
    };
    onBalanceChange(listener: (userId: string) => void, resync: () => void): Promise<void>;
  };
}

const CHAT: RequestKind = { validate: validateChatBody };
const EMBEDDINGS: RequestKind = { validate: validateEmbeddingsBody, estimate: estimateEmbeddingCost };

const NOTHING_USED: UsageCounts = { prompt: 0, completion: 0, cached: 0, reasoning: 0, counted: false };

/** The largest value a count field takes (a PostgreSQL integer, as servers type them). */
const MAX_COUNT = 2_147_483_647;

/** `name`, when present (and not null), must be a positive integer. */
function optionalCount(b: Record<string, unknown>, name: string) {
  const v = b[name];
  if (v !== undefined && v !== null && !(typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= MAX_COUNT))
    throw new AppError('invalid', `${name} must be a positive integer`);
}

export function validateChatBody(body: unknown): asserts body is Record<string, unknown> {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new AppError('invalid', 'the request body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '') throw new AppError('invalid', 'model is required (a string)');
  if (!Array.isArray(b.messages) || b.messages.length === 0) throw new AppError('invalid', 'messages is required (a non-empty array)');
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw new AppError('invalid', 'stream must be a boolean');
  // Servers coerce "20" or 20.0 to 20 choices or tokens: the hold must read what they will.
  for (const name of ['n', 'max_tokens', 'max_completion_tokens']) optionalCount(b, name);
}

export function createRouterService(ctx: AppContext, deps: RouterDeps) {
  const settings = ctx.config.router;
  const estimates: EstimateSettings = { imageTokens: ctx.config.imageTokens, defaultMaxTokens: ctx.config.admissionDefaultMaxTokens };
  const backends = createBackendSet(settings, ctx.log);
  for (const [slug, configured] of Object.entries(ctx.config.modelBackends))
    for (const { url, apiKey } of configured) backends.register(slug, url, { source: 'env', apiKey });
  const adminBackends = createAdminBackends(ctx, backends, new Set(settings.routes.keys()));
  // This process's name in the wallet grants table.
  const holder = newId('proc');
  const admission = createAdmission(deps.billing.grants, deps.billing.onBalanceChange, ctx.log, {
    holder,
    grantTtlMs: ctx.config.walletGrantTtlMs,
    waitMs: settings.admissionWaitMs,
  });
  const keyLimits = createKeyLimits(ctx, deps.keyLimitsOf, { holder, grantTtlMs: ctx.config.walletGrantTtlMs, waitMs: settings.admissionWaitMs, events: deps.keyEvents });
  const usage = createUsageWriter(ctx, deps.billing, holder, admission.committed, keyLimits, {
    synchronousCommit: ctx.config.usageSynchronousCommit,
    journalDir: ctx.config.usageJournal ? join(ctx.config.dataDir, 'journal', 'usage') : null,
  });
  const metrics = createRouterMetrics(ctx.metrics, ctx.config.currency, { backends: backends.list, usage: () => ({ queued: usage.queued, setAside: usage.setAside }) });
  const toUsd = usdConverter(ctx.config.site, ctx.config.usdPerCny);
  const stopProbing = backends.startProbing();
  // Loads the tokenizer's tables off the start-up path, before the first request is likely to need them.
  const preload = setTimeout(() => void loadTokenizer(), 1000);
  preload.unref?.();
  ctx.onShutdown(async () => {
    clearTimeout(preload);
    stopProbing();
    await usage.close(DRAIN_DEADLINE_MS);
    await Promise.all([admission.close(), keyLimits.close()]);
  });

  function plan(body: Record<string, unknown>, bodyBytes: number, kind: RequestKind, userId: string | null): Plan {
    const bound = kind.estimate ? null : requestBound(body, bodyBytes, estimates);
    const estimate = (c: Candidate) => (bound ? estimateCost(c.price, bound) : kind.estimate!(c.price, bodyBytes, body));
    const minimum = (c: Candidate) => (bound ? minimumCost(c.price, bound) : estimate(c));
    const asked = body.model as string;
    const route = settings.routes.get(asked);
    const priced = (slug: string): Candidate | null => {
      const price = deps.pricing.priceOf(slug, userId);
      return price ? { slug, price } : null;
    };
    let candidates: Candidate[];
    if (route) {
      const pricedModels = route.models.map(priced).filter((c): c is Candidate => c !== null);
      if (!pricedModels.length) throw new AppError('not_found', `route "${asked}" has no priced model`);
      candidates = pricedModels.filter((c) => backends.has(c.slug));
      if (!candidates.length) throw new AppError('unavailable', `no backend serves route "${asked}"`);
      if (route.strategy === 'cheapest') {
        const est = new Map(candidates.map((c) => [c.slug, estimate(c)]));
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
    const need: Need = { estimate: 0n, minimum: 0n };
    for (const c of candidates) {
      const e = estimate(c);
      const m = minimum(c);
      if (e > need.estimate) need.estimate = e;
      if (m > need.minimum) need.minimum = m;
    }
    return { entrypoint: asked, candidates, need, bound };
  }

  /**
   * The most completion tokens per choice a request may have on `slug`: the caller's maximum, or
   * less when its hold is below its bound there (the allowance the hold affords after the prompt
   * bound, at least one token); null when neither bounds it.
   */
  function perChoiceLimit(a: Admitted, slug: string): number | null {
    const bound = a.plan.bound;
    if (!bound) return null;
    const caller = bound.callerMax ? bound.perChoice : null;
    const price = a.plan.candidates.find((c) => c.slug === slug)!.price;
    if (price.unit === 'per_request' || a.holdMicros >= estimateCost(price, bound)) return caller;
    const allowance = Math.max(1, Math.floor(completionWithin(price, a.holdMicros, bound.promptTokens) / bound.choices));
    return caller === null ? allowance : Math.min(caller, allowance);
  }

  /** The request's maximum fields for the upstream when its allowance is below what the caller asked (or the caller asked none). */
  function allowanceFields(a: Admitted, slug: string): Record<string, number> | null {
    const limit = perChoiceLimit(a, slug);
    const bound = a.plan.bound;
    if (limit === null || !bound || (bound.callerMax && limit === bound.perChoice)) return null;
    const body = a.req.body;
    // The caller's own fields are overwritten; without either, max_tokens, which every chat server reads.
    const own = body.max_completion_tokens != null;
    return { ...(own ? { max_completion_tokens: limit } : {}), ...(!own || body.max_tokens != null ? { max_tokens: limit } : {}) };
  }

  /**
   * What a served request is billed for: the counts, with the completion clamped to n × the per-choice
   * limit (the caller's maximum or the allowance) when more was reported; the row keeps the figure.
   */
  function billed(a: Admitted, candidate: Candidate, counts: UsageCounts): { costMicros: bigint; clamped: boolean } {
    const limit = perChoiceLimit(a, candidate.slug);
    const most = limit === null ? counts.completion : limit * a.plan.bound!.choices;
    const clamped = counts.completion > most;
    return { costMicros: costOf(candidate.price, counts.prompt, clamped ? most : counts.completion, counts.cached), clamped };
  }

  const statusOf = (err: unknown) => (err instanceof AppError ? STATUS_OF_KIND[err.kind] : 500);

  /**
   * Admit: validation, the API key's models, the routing plan, the key's other limits and the
   * wallet hold; latency is measured from here. Every entry point passes here, so each gets the
   * key's limits. The ticket ends both holds when the usage row is committed.
   */
  async function admit(req: ChatRequest, kind: RequestKind = CHAT): Promise<Admitted> {
    const started = performance.now();
    kind.validate(req.body);
    const key = req.caller ? await keyLimits.allowed(req.caller.keyId, req.body.model as string, req.caller.userId) : null;
    const planned = plan(req.body, req.bodyBytes ?? JSON.stringify(req.body).length, kind, req.caller?.userId ?? null);
    const p = req.entrypoint ? { ...planned, entrypoint: req.entrypoint } : planned;
    if (!req.caller) return { req, plan: p, ticket: null, holdMicros: p.need.estimate, started };
    const keyHold = await keyLimits.admit(key, p.need, req.signal);
    let wallet: Ticket;
    try {
      // What the key holds bounds what the wallet needs.
      wallet = await admission.admit(req.caller.userId, keyHold ? { ...p.need, estimate: keyHold.holdMicros } : p.need, req.signal);
    } catch (err) {
      keyHold?.release();
      throw err;
    }
    const ticket: Ticket = keyHold
      ? {
          holdMicros: wallet.holdMicros,
          release() {
            wallet.release();
            keyHold.release();
          },
        }
      : wallet;
    return { req, plan: p, ticket, holdMicros: ticket.holdMicros, started, memberKey: key?.member?.id ?? null };
  }

  /**
   * Call: tries each candidate model's backends in order; the backend that answers stays leased
   * until the caller releases it. When none answers, the failure is committed (a usage row that
   * costs nothing) and thrown.
   */
  async function call<T>(a: Admitted, streamed: boolean, attempt: (upstream: Upstream, slug: string, control: AttemptControl) => Promise<T>): Promise<{ served: Served; result: T }> {
    try {
      return await failover(a, attempt);
    } catch (err) {
      const aborted = a.req.signal?.aborted === true;
      const status = aborted ? CLIENT_CLOSED_REQUEST : statusOf(err);
      // The failure is what the caller hears, whatever became of its (costless) usage row.
      await commit(a, { model: a.plan.candidates[0]!.slug, backend: null, counts: NOTHING_USED, costMicros: 0n, status, streamed, aborted, clamped: false }).catch(() => {});
      throw err;
    }
  }

  async function failover<T>(a: Admitted, attempt: (upstream: Upstream, slug: string, control: AttemptControl) => Promise<T>): Promise<{ served: Served; result: T }> {
    let last: AttemptError | null = null;
    let answered = false;
    // Admission's wait and every attempt together end here: an answer (or this 503) must come before
    // the server closes a connection that has heard nothing (config-router.ts).
    const deadline = { at: a.started + settings.requestTimeoutMs, why: `ROUTER_REQUEST_TIMEOUT (${settings.requestTimeoutMs / 1000}s) ran out` };
    attempts: for (const candidate of a.plan.candidates) {
      for (const backend of backends.candidates(candidate.slug)) {
        if (performance.now() >= deadline.at) {
          last = deadlineError(deadline);
          break attempts;
        }
        const lease = leaseBackend(backend, a.req.signal, deadline);
        try {
          const result = await attempt(backend, candidate.slug, lease.control);
          backends.markOk(backend);
          return { served: { candidate, lease }, result };
        } catch (err) {
          lease.release();
          // Anything but an AttemptError was thrown by our own code: not the backend's fault.
          if (!(err instanceof AttemptError)) throw err;
          if (err.reason === 'aborted') throw new AppError('unavailable', 'the request was aborted');
          if (err.reason === 'invalid') throw new AppError(err.status === 413 ? 'payload_too_large' : 'invalid', `upstream refused the request: ${err.message}`);
          last = err;
          if (err.reason === 'deadline') break attempts; // the backend was cut short, not found failing
          // A refusal of this request is an answer: the next backend is tried, this one stays in rotation.
          if (err.reason !== 'refused') backends.markFailed(backend, err.message);
          answered ||= err.reason !== 'connect';
        }
      }
    }
    if (answered) throw new AppError('upstream', `bad upstream answer: ${last?.message}`);
    throw new AppError('unavailable', `no upstream available: ${last?.message ?? 'no backend'}`);
  }

  /**
   * Commit: writes the usage row and its debit (group commit) and only then ends the wallet hold.
   * A row that could not be written throws: an answer is never given without its bill. With the
   * usage journal the row is appended to it instead (surviving the death of this process) and the
   * answer goes on; the hold still ends only at the commit, so the overspend bound is unchanged.
   */
  async function commit(a: Admitted, m: Metered): Promise<void> {
    const record: UsageRecord = {
      id: newId('use'),
      createdAt: ctx.clock.now(),
      userId: a.req.caller?.userId ?? null,
      keyId: a.req.caller?.keyId ?? null,
      memberKey: a.memberKey ?? null,
      entrypoint: a.plan.entrypoint,
      model: m.model,
      backend: m.backend,
      promptTokens: m.counts.prompt,
      completionTokens: m.counts.completion,
      cachedTokens: m.counts.cached,
      reasoningTokens: m.counts.reasoning,
      costMicros: m.costMicros,
      costUsdMicros: toUsd(m.costMicros),
      tokensCounted: m.counts.counted,
      clamped: m.clamped,
      latencyMs: Math.round(performance.now() - a.started),
      status: m.status,
      streamed: m.streamed,
      aborted: m.aborted,
      requestId: a.req.requestId ?? null,
    };
    a.req.onUsage?.(record);
    if (m.clamped)
      ctx.log.warn({ usage_id: record.id, user_id: record.userId, model: m.model, backend: m.backend, completion_tokens: m.counts.completion }, 'completion tokens clamped to the request maximum: the upstream reported more than it was asked for');
    // The overspend bound rests on every cost staying within its hold: say so when one did not.
    if (m.costMicros > a.holdMicros)
      ctx.log.warn(
        { usage_id: record.id, user_id: record.userId, model: m.model, backend: m.backend, prompt_tokens: m.counts.prompt, cost_micros: String(m.costMicros), hold_micros: String(a.holdMicros) },
        'request cost above its admission hold: the upstream counted more prompt tokens than the body bounds (an image above IMAGE_TOKENS?)',
      );
    // Once the row has its outcome: the holds end, and a written row counts in the metrics.
    const settled = (outcome: RowOutcome) => {
      a.ticket?.release();
      if (outcome === 'written') metrics.metered(m.model, m.status, m.counts.prompt, m.counts.completion, m.costMicros);
      return outcome;
    };
    const journaled = usage.journaled(record);
    if (journaled) return void journaled.then(settled);
    // The writer answers every row with an outcome; it never rejects.
    if (settled(await usage.record(record)) !== 'written')
      throw new AppError('unavailable', 'the usage of this request could not be recorded, so it is not answered (nothing was billed)');
  }

  /** The upstream's request body: the caller's, for `slug`, with the completion allowance when it has one. */
  function payloadFor(a: Admitted, slug: string, stream: boolean): string {
    const body = a.req.body;
    const allowance = allowanceFields(a, slug);
    // completeChat given stream: true (a library caller) still gets one JSON answer.
    if (!stream) return JSON.stringify(body.stream === true ? { ...body, model: slug, ...allowance, stream: false, stream_options: undefined } : { ...body, model: slug, ...allowance });
    const options = body.stream_options && typeof body.stream_options === 'object' ? body.stream_options : {};
    return JSON.stringify({ ...body, model: slug, ...allowance, stream: true, stream_options: { ...options, include_usage: true } });
  }

  async function completeChat(req: ChatRequest): Promise<{ response: Chunk; costMicros: bigint }> {
    const a = await admit(req);
    const { served, result: response } = await call(a, false, (upstream, slug, control) => completeOnce(upstream, payloadFor(a, slug, false), control, settings.firstByteTimeoutMs));
    served.lease.release();
    const counts = await completionCounts(req.body, response);
    const { costMicros, clamped } = billed(a, served.candidate, counts);
    const base = counts.counted ? { prompt_tokens: counts.prompt, completion_tokens: counts.completion, total_tokens: counts.prompt + counts.completion } : (response.usage as Record<string, unknown>);
    response.usage = { ...base, cost: toMajor(costMicros) };
    await commit(a, { model: served.candidate.slug, backend: served.lease.backend.url, counts, costMicros, status: 200, streamed: false, aborted: false, clamped });
    return { response, costMicros };
  }

  /**
   * A stream's prompt tokens, counted at most once and only when needed: for a per-token price
   * (the provisional X-Cost), or when the upstream reports no usage. Counting a long prompt takes
   * milliseconds (100 KB of text: ~3.6 ms on the development machine), so where a price needs it
   * the count starts once the request is on its way upstream (Bun's fetch sends it from its own
   * thread) and runs while the model works on its first token, not after that token arrived.
   */
  function promptCounter(body: Record<string, unknown>, candidates: Candidate[]): () => Promise<number> {
    let counted: Promise<number> | null = null;
    const count = () => (counted ??= countPromptTokens(body));
    if (candidates.some((c) => c.price.unit === 'per_million_tokens')) setImmediate(() => void count().catch(() => {}));
    return count;
  }

  /** Opens a stream: admission and failover happen here, so an error is thrown before any chunk. */
  async function openStream(req: ChatRequest): Promise<ChatStream> {
    const a = await admit(req);
    const prompt = promptCounter(req.body, a.plan.candidates);
    const { served, result: opened } = await call(a, true, (upstream, slug, control) =>
      openStreamOnce(upstream, payloadFor(a, slug, true), control, { connectMs: settings.connectTimeoutMs, firstByteMs: settings.firstByteTimeoutMs }),
    );
    const { candidate, lease } = served;
    const firstOut = addGenerated(noneGenerated(), opened.head.flatMap(deltasOf));
    const headerCostMicros = candidate.price.unit === 'per_request' ? costOf(candidate.price, 0, 0) : costOf(candidate.price, await prompt(), await countGenerated(firstOut));
    const meter = createStreamMeter(opened.head, prompt);

    /** Ends the stream's accounting once, whichever way it ended; resolves after the commit. */
    let ending: Promise<{ counts: UsageCounts; cost: bigint }> | null = null;
    const end = (outcome: StreamOutcome) =>
      (ending ??= (async () => {
        lease.release();
        const counts = await meter.counts(outcome);
        const { costMicros: cost, clamped } = meter.billable(outcome) ? billed(a, candidate, counts) : { costMicros: 0n, clamped: false };
        const status = outcome === 'done' ? 200 : outcome === 'client' ? CLIENT_CLOSED_REQUEST : 502;
        await commit(a, { model: candidate.slug, backend: lease.backend.url, counts, costMicros: cost, status, streamed: true, aborted: outcome !== 'done', clamped });
        return { counts, cost };
      })());

    async function* chunks(): AsyncGenerator<Chunk> {
      let outcome: StreamOutcome = 'done';
      let ended = false;
      try {
        for (const c of opened.head) {
          const out = meter.take(c);
          if (out) yield out;
        }
        for (;;) {
          const { value, done } = await opened.rest.next();
          if (done) break;
          const out = meter.take(value);
          if (out) yield out;
        }
        ended = true;
      } catch (err) {
        ended = true;
        outcome = lease.clientGone ? 'client' : 'upstream';
        if (outcome === 'upstream') {
          ctx.log.warn({ msg: 'upstream stream broke', model: candidate.slug, backend: lease.backend.url, error: (err as Error).message });
          backends.markFailed(lease.backend, (err as Error).message);
        }
      } finally {
        // Not ended: the consumer stopped iterating (return()), i.e. the client went away.
        if (!ended || outcome === 'client') {
          lease.abort();
          // Nobody is left to hear a failure to record it; the writer has logged it.
          await end('client').catch(() => {});
        }
      }
      if (outcome === 'client') return;
      // The usage commits before the final usage chunk (and so before [DONE]) is handed out.
      const { counts, cost } = await end(outcome);
      yield meter.finalChunk(outcome, counts, cost, candidate.slug);
    }

    const iterator = chunks();
    return {
      model: candidate.slug,
      headerCostMicros,
      abort: () => lease.abort(),
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

  const embeddings = createEmbeddings({ admit, call, commit }, EMBEDDINGS, settings.firstByteTimeoutMs);

  return {
    completeChat,
    embed: embeddings.embed,
    openStream,
    streamChat,
    listModels,
    /** A priced model slug, or a route with a priced model (what an API key may be limited to). */
    isModel: (name: string) => deps.pricing.priceOf(name) !== null || (settings.routes.get(name)?.models.some((m) => deps.pricing.priceOf(m) !== null) ?? false),
    /** Spent by each API key in its current period, from the usage rows. */
    keySpentBy: keyLimits.spentBy,
    registerBackend: (slug: string, baseUrl: string, opts?: BackendOptions) => backends.register(slug, baseUrl, opts),
    listBackends: backends.list,
    /** PUT /api/admin/router/backends: replaces the admin-managed set on every process; answers the whole list. */
    async replaceBackends(input: BackendInput[]) {
      await adminBackends.replace(input);
      return backends.list();
    },
    /** Probes every backend now (tests; the periodic probe runs on its own). */
    probeBackends: backends.probeAll,
    /** Resolves when every usage row handed to the writer so far has its outcome (tests). */
    flushUsage: () => usage.flush(),
    /** Usage rows waiting for a batch, and rows set aside since start (for metrics). */
    usageStats: () => ({ queued: usage.queued, setAside: usage.setAside }),
    /**
     * The path every entry point takes, for endpoints beyond chat completions: admit(req, kind?) holds the
     * cost's upper bound; call(admitted, streamed, attempt) leases the backend that answers;
     * commit(admitted, metered) writes the usage and its debit before the answer may end (and ends
     * the hold). Release the lease (served.lease.release()) when the upstream is done.
     */
    metering: { admit, call, commit, priceOf: (slug: string, userId?: string | null) => deps.pricing.priceOf(slug, userId) },
    /** Resolves once balance changes are listened to and the admin-managed backends are loaded and followed. */
    ready: () => Promise.all([admission.ready, adminBackends.load()]).then(() => {}),
  };
}

export type RouterService = ReturnType<typeof createRouterService>;

/**
 * The Anthropic Messages API passed through to backends of format `anthropic`, on the router's
 * path (admit, call, meter, commit) like chat. The client's body goes upstream as it came, with
 * `model` set to the slug served and `max_tokens` lowered to the request's allowance when its hold
 * affords less: thinking blocks and their signatures reach the backend byte for byte, and every
 * event the backend streams reaches the client unchanged, except the closing `message_delta`,
 * which is held until the usage is committed and then carries the cost. A stream the backend breaks
 * (or ends with an `error` event) is billed for what was delivered and ends with an `error` event.
 *
 * Admission reads the request's chat translation (`ChatRequest.body`): the same prompt and
 * completion bounds, the same key and model checks as chat.
 */
import type { Logger } from '../../platform/logger';
import { toMajor } from '../../platform/money';
import type { RouterSettings } from '../../config-router';
import { type Chunk, type StreamOutcome, type UsageCounts, costOf, countPromptTokens, createMessagesMeter, messageCounts } from '../metering';
import { ANTHROPIC_VERSION, type Backend } from './router.backends';
import type { Admitted, Candidate, ChatRequest, Metered, Served } from './router.types';
import { type AttemptControl, type MessageEvent, type Upstream, messageOnce, openMessagesOnce } from './router.upstream';
import { CLIENT_CLOSED_REQUEST } from '../../platform/errors';

type Json = Record<string, unknown>;

export interface MessagesRequest extends ChatRequest {
  /** The Messages API body as the client sent it; `body` is its chat translation, which admission reads. */
  message: Json;
  /** The client's `anthropic-version` and `anthropic-beta` headers, forwarded. */
  headers: { version?: string; beta?: string };
}

/** An opened Messages API stream: iterate for the events to send (the closing ones carry the cost). */
export interface MessagesStream extends AsyncIterable<MessageEvent> {
  model: string;
  /** The cost known when the first output arrived; the closing message_delta has the definitive one. */
  headerCostMicros: bigint;
  abort(): void;
}

interface PathDeps {
  admit(req: ChatRequest): Promise<Admitted>;
  call<T>(a: Admitted, streamed: boolean, attempt: (upstream: Upstream, slug: string, control: AttemptControl) => Promise<T>): Promise<{ served: Served; result: T }>;
  commit(a: Admitted, m: Metered): Promise<void>;
  billed(a: Admitted, candidate: Candidate, counts: UsageCounts): { costMicros: bigint; clamped: boolean };
  /** The most completion tokens the request may have on a slug (its maximum or its allowance), null when unbounded. */
  limitOf(a: Admitted, slug: string): number | null;
  /** A stream that had started broke: the backend's failure (backoff and its breaker). */
  brokeMidStream(backend: Backend, error: string): void;
}

/** An `error` event in Anthropic's shape. */
export const errorEvent = (type: string, message: string): MessageEvent => {
  const data = { type: 'error', error: { type, message } };
  return { event: 'error', data, raw: JSON.stringify(data) };
};

export function createMessagesPassthrough(settings: RouterSettings, log: Logger, deps: PathDeps) {
  function upstreamHeaders(req: MessagesRequest): Record<string, string> {
    return { 'anthropic-version': req.headers.version ?? ANTHROPIC_VERSION, ...(req.headers.beta ? { 'anthropic-beta': req.headers.beta } : {}) };
  }

  /** The client's body for `slug`, its max_tokens (and a thinking budget above it) lowered to the allowance. */
  function payloadFor(a: Admitted, req: MessagesRequest, slug: string, stream: boolean): string {
    const body: Json = { ...req.message, model: slug, stream };
    const limit = deps.limitOf(a, slug);
    if (limit !== null && typeof body.max_tokens === 'number' && limit < body.max_tokens) {
      body.max_tokens = limit;
      const thinking = body.thinking as Json | undefined;
      // Anthropic wants the thinking budget below max_tokens.
      if (thinking?.type === 'enabled' && typeof thinking.budget_tokens === 'number' && thinking.budget_tokens >= limit) body.thinking = { ...thinking, budget_tokens: Math.max(1, limit - 1) };
    }
    return JSON.stringify(body);
  }

  const admitMessages = (req: MessagesRequest) => deps.admit({ ...req, format: 'anthropic' });

  async function complete(req: MessagesRequest): Promise<{ response: Chunk; costMicros: bigint }> {
    const a = await admitMessages(req);
    const headers = upstreamHeaders(req);
    const { served, result: response } = await deps.call(a, false, (upstream, slug, control) => messageOnce(upstream, payloadFor(a, req, slug, false), headers, control, settings.firstByteTimeoutMs));
    served.lease.release();
    const counts = await messageCounts(response, () => countPromptTokens(req.body));
    const { costMicros, clamped } = deps.billed(a, served.candidate, counts);
    response.usage = { ...((response.usage as Json | undefined) ?? {}), cost: toMajor(costMicros) };
    await deps.commit(a, { model: served.candidate.slug, backend: served.lease.backend.url, counts, costMicros, status: 200, streamed: false, aborted: false, clamped });
    return { response, costMicros };
  }

  async function open(req: MessagesRequest): Promise<MessagesStream> {
    const a = await admitMessages(req);
    const headers = upstreamHeaders(req);
    const { served, result: opened } = await deps.call(a, true, (upstream, slug, control) =>
      openMessagesOnce(upstream, payloadFor(a, req, slug, true), headers, control, { connectMs: settings.connectTimeoutMs, firstByteMs: settings.firstByteTimeoutMs }),
    );
    const { candidate, lease } = served;
    let prompt: Promise<number> | null = null;
    const meter = createMessagesMeter(() => (prompt ??= countPromptTokens(req.body)));
    for (const e of opened.head) meter.take(e.event, e.data);
    const known = await meter.counts('upstream');
    const headerCostMicros = costOf(candidate.price, known.prompt, known.completion, known.cached);

    let ending: Promise<{ counts: UsageCounts; cost: bigint }> | null = null;
    const end = (outcome: StreamOutcome) =>
      (ending ??= (async () => {
        lease.release();
        const counts = await meter.counts(outcome);
        const { costMicros: cost, clamped } = meter.billable(outcome) ? deps.billed(a, candidate, counts) : { costMicros: 0n, clamped: false };
        const status = outcome === 'done' ? 200 : outcome === 'client' ? CLIENT_CLOSED_REQUEST : 502;
        await deps.commit(a, { model: candidate.slug, backend: lease.backend.url, counts, costMicros: cost, status, streamed: true, aborted: outcome !== 'done', clamped });
        return { counts, cost };
      })());

    async function* events(): AsyncGenerator<MessageEvent> {
      let outcome: StreamOutcome = 'done';
      let ended = false;
      let closing: MessageEvent | null = null;
      let upstreamError: MessageEvent | null = null;
      /** The event to pass on now, or null for those held back (the closing ones, an error). */
      const pass = (e: MessageEvent): MessageEvent | null => {
        if (e.event === 'message_delta') closing = e;
        else if (e.event === 'error') upstreamError = e;
        else if (e.event !== 'message_stop') return e;
        return null;
      };
      try {
        for (const e of opened.head) {
          const out = pass(e);
          if (out) yield out;
        }
        while (!upstreamError) {
          const { value, done } = await opened.rest.next();
          if (done) break;
          meter.take(value.event, value.data);
          const out = pass(value);
          if (out) yield out;
        }
        ended = true;
        if (!meter.complete) {
          outcome = 'upstream';
          log.warn({ msg: 'upstream stream broke', model: candidate.slug, backend: lease.backend.url, error: upstreamError ? (upstreamError as MessageEvent).raw : 'ended before message_stop' });
        }
      } catch (err) {
        ended = true;
        outcome = lease.clientGone ? 'client' : 'upstream';
        if (outcome === 'upstream') {
          log.warn({ msg: 'upstream stream broke', model: candidate.slug, backend: lease.backend.url, error: (err as Error).message });
          deps.brokeMidStream(lease.backend, (err as Error).message);
        }
      } finally {
        if (!ended || outcome === 'client') {
          lease.abort();
          await end('client').catch(() => {});
        }
      }
      if (outcome === 'client') return;
      // The usage commits before the closing events (or the error) are handed out.
      const { counts, cost } = await end(outcome);
      if (outcome !== 'done') {
        yield upstreamError ?? errorEvent('api_error', 'the upstream stream ended before the answer was complete');
        return;
      }
      const delta: Json = (closing as MessageEvent | null)?.data ?? { type: 'message_delta', delta: { stop_reason: null, stop_sequence: null }, usage: { output_tokens: counts.completion } };
      const data = { ...delta, usage: { ...((delta.usage as Json | undefined) ?? {}), cost: toMajor(cost) } };
      yield { event: 'message_delta', data, raw: JSON.stringify(data) };
      yield { event: 'message_stop', data: { type: 'message_stop' }, raw: '{"type":"message_stop"}' };
    }

    const iterator = events();
    return { model: candidate.slug, headerCostMicros, abort: () => lease.abort(), [Symbol.asyncIterator]: () => iterator };
  }

  return { complete, open };
}

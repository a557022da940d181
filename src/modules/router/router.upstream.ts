/**
 * One attempt against one backend. Bun's fetch does not expose the TCP connect phase, so the
 * bounds are: for a stream, the response headers within ROUTER_CONNECT_TIMEOUT (an OpenAI server
 * answers a stream's headers as soon as it accepts it) and the first token within
 * ROUTER_FIRST_BYTE_TIMEOUT; for a JSON completion, the whole answer within
 * ROUTER_FIRST_BYTE_TIMEOUT (its headers come only with its body). Unreachable backends are also
 * caught by the probe, which is bounded by the connect timeout.
 */
import { createParser } from 'eventsource-parser';
import { type BodyReader, fetchPost, type HttpAnswer, http1Post } from '../../platform/http/http1-client';
import { type Chunk, deltasOf, hasOutput } from '../metering';

/** Why an attempt failed, and whether another backend may do better. */
export class AttemptError extends Error {
  constructor(
    /**
     * 'connect': no answer; 'upstream': an answer that is an error or garbage; 'invalid': the request
     * itself is refused (no backend would take it); 'refused': this backend will not serve it (a 4xx
     * but 401, 408 and 429), another may; 'deadline': the request's own time ran out. Only 'connect' and
     * 'upstream' are the backend's fault.
     */
    readonly reason: 'connect' | 'upstream' | 'invalid' | 'refused' | 'aborted' | 'deadline',
    message: string,
    /** The upstream's HTTP status, when it answered one. */
    readonly status?: number,
  ) {
    super(message);
  }
}

/**
 * The protocol a backend speaks: `openai` (chat completions under an OpenAI base URL, `…/v1`) or
 * `anthropic` (the Messages API under an Anthropic base URL, which `/v1/messages` follows).
 */
export type BackendFormat = 'openai' | 'anthropic';

/** Where an attempt goes: a base URL in its format and the API key it needs, if any. */
export interface Upstream {
  url: string;
  apiKey: string | null;
  /** Default openai. */
  format?: BackendFormat;
  /** Called over cpd's own HTTP/1.1 client (ROUTER_UPSTREAM_CLIENT=http1, a plain-HTTP URL, no HTTP proxy) rather than fetch. */
  direct?: boolean;
}

/** Whether a backend at `url` is called over cpd's own client: chosen (`ownHttpClient`) and plain HTTP. */
export const isDirect = (url: string, ownHttpClient: boolean) => ownHttpClient && url.startsWith('http:');

/** The upstream's credential as a header (Anthropic's own header for its format); empty without a key. */
export const authorizationOf = (upstream: Upstream): Record<string, string> =>
  !upstream.apiKey ? {} : upstream.format === 'anthropic' ? { 'x-api-key': upstream.apiKey } : { authorization: `Bearer ${upstream.apiKey}` };

const rawText = new WeakMap<Chunk, string>();

/** The JSON text a chunk was parsed from, so a proxy can forward it without serializing it again. */
export function rawJsonOf(chunk: Chunk): string | undefined {
  return rawText.get(chunk);
}

/** The request's whole wait for its first byte ends at `at` (performance.now() time); `why` says which setting. */
export interface AttemptDeadline {
  at: number;
  why: string;
}

/** The failure of an attempt cut short, or never made, because the request's time ran out. */
export const deadlineError = (deadline: AttemptDeadline) => new AttemptError('deadline', `no answer before ${deadline.why}`);

/**
 * A combined signal: the caller's (client disconnect) plus our own abort and timer. Each timer is
 * cut short by the request's deadline, if it comes first.
 */
export function attemptController(outer: AbortSignal | undefined, deadline?: AttemptDeadline) {
  const ac = new AbortController();
  let timer: Timer | undefined;
  const onOuter = () => ac.abort(new AttemptError('aborted', 'client went away'));
  if (outer?.aborted) onOuter();
  else outer?.addEventListener('abort', onOuter, { once: true });
  return {
    signal: ac.signal,
    arm(ms: number, what: string) {
      clearTimeout(timer);
      const left = deadline ? deadline.at - performance.now() : ms;
      // The failure is made only when the timer fires: an Error captures a stack, and most attempts never time out.
      const byDeadline = deadline !== undefined && left < ms;
      timer = setTimeout(() => ac.abort(byDeadline ? deadlineError(deadline) : new AttemptError('connect', `${what} timed out after ${ms} ms`)), Math.max(0, Math.min(ms, left)));
    },
    disarm() {
      clearTimeout(timer);
    },
    abort(reason: AttemptError) {
      ac.abort(reason);
    },
    dispose() {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onOuter);
    },
  };
}

export type AttemptControl = ReturnType<typeof attemptController>;

function failureOf(err: unknown, control: AttemptControl): AttemptError {
  const reason = control.signal.reason;
  if (control.signal.aborted && reason instanceof AttemptError) return reason;
  if (err instanceof AttemptError) return err;
  return new AttemptError('connect', (err as Error)?.message ?? String(err));
}

/** How servers say a request is longer than the model's context (vLLM, OpenAI, TGI, llama.cpp, Ollama). */
const CONTEXT_EXCEEDED = /context[ _-]?length|maximum context|context window|context size/i;

/** The 4xx statuses that say the backend failed (401: the key cpd sends; 408: its own timeout; 429: overloaded). */
const BACKEND_FAULT_4XX = new Set([401, 408, 429]);

async function errorFromStatus(res: HttpAnswer): Promise<AttemptError> {
  let detail = '';
  try {
    const body = JSON.parse(await res.text()) as { error?: { message?: unknown } | string };
    detail = typeof body.error === 'string' ? body.error : String(body.error?.message ?? '');
  } catch {}
  const message = `upstream answered ${res.status}${detail ? `: ${detail}` : ''}`;
  // The request itself is wrong (malformed, too large, longer than the model's context, whatever the
  // status says so): no other backend would take it.
  if (res.status === 400 || res.status === 413 || res.status === 422 || CONTEXT_EXCEEDED.test(detail)) return new AttemptError('invalid', detail || `upstream refused the request (${res.status})`, res.status);
  // Any other 4xx (payment, permission, an unknown model, a method or media type it will not take) is
  // this backend's answer to this request, not a failure of the backend; except a refused credential
  // (ours, not the caller's), its own timeout and its overload, which are.
  if (res.status >= 400 && res.status < 500 && !BACKEND_FAULT_4XX.has(res.status)) return new AttemptError('refused', message, res.status);
  return new AttemptError('upstream', message, res.status);
}

function post(upstream: Upstream, payload: string, signal: AbortSignal, path = '/chat/completions', headers: Record<string, string> = {}) {
  const init = { headers: { 'content-type': 'application/json', ...headers, ...authorizationOf(upstream) }, body: payload, signal };
  return (upstream.direct ? http1Post : fetchPost)(`${upstream.url}${path}`, init);
}

/** A JSON completion; throws AttemptError. */
export function completeOnce(upstream: Upstream, payload: string, control: AttemptControl, firstByteTimeoutMs: number): Promise<Chunk> {
  return jsonOnce(upstream, '/chat/completions', payload, control, firstByteTimeoutMs, (d) => Array.isArray(d.choices), 'a chat completion');
}

/** An embeddings answer (`data` a list); throws AttemptError. */
export function embedOnce(upstream: Upstream, payload: string, control: AttemptControl, firstByteTimeoutMs: number): Promise<Chunk> {
  return jsonOnce(upstream, '/embeddings', payload, control, firstByteTimeoutMs, (d) => Array.isArray(d.data), 'an embeddings list');
}

/** A Messages API answer (`type: message`) from an anthropic-format backend; `headers` carry the API version and betas. Throws AttemptError. */
export function messageOnce(upstream: Upstream, payload: string, headers: Record<string, string>, control: AttemptControl, firstByteTimeoutMs: number): Promise<Chunk> {
  return jsonOnce(upstream, '/v1/messages', payload, control, firstByteTimeoutMs, (d) => d.type === 'message' && Array.isArray(d.content), 'a message', headers);
}

async function jsonOnce(
  upstream: Upstream,
  path: string,
  payload: string,
  control: AttemptControl,
  firstByteTimeoutMs: number,
  valid: (data: Chunk) => boolean,
  what: string,
  headers: Record<string, string> = {},
): Promise<Chunk> {
  control.arm(firstByteTimeoutMs, 'upstream answer');
  try {
    const res = await post(upstream, payload, control.signal, path, headers);
    if (!res.ok) throw await errorFromStatus(res);
    const text = await res.text();
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      throw new AttemptError('upstream', 'upstream answered something that is not JSON');
    }
    if (!data || typeof data !== 'object' || !valid(data as Chunk)) throw new AttemptError('upstream', `upstream answered JSON that is not ${what}`);
    return data as Chunk;
  } catch (err) {
    throw failureOf(err, control);
  } finally {
    control.disarm();
  }
}

/** True for a chunk that carries output (text or reasoning, a call, a finish reason) or usage. */
export function isMeaningful(chunk: Chunk): boolean {
  if (chunk.usage) return true;
  const choices = chunk.choices as Array<{ finish_reason?: unknown }> | undefined;
  if (!Array.isArray(choices)) return false;
  return choices.some((c) => c.finish_reason) || deltasOf(chunk).some(hasOutput);
}

export interface OpenedUpstream {
  /** Chunks read so far (up to and including the first meaningful one). */
  head: Chunk[];
  /** The rest: parsed chunks until [DONE] or the end of the body. */
  rest: AsyncIterator<Chunk>;
}

type Timeouts = { connectMs: number; firstByteMs: number };

/**
 * Posts, then reads an event stream up to its first event with output (`isOutput`, which may throw
 * to fail the attempt), so that a backend that fails before producing any can be failed over.
 * Throws AttemptError.
 */
async function openEvents<T>(
  request: { upstream: Upstream; payload: string; path?: string; headers?: Record<string, string> },
  control: AttemptControl,
  timeouts: Timeouts,
  eventsOf: (reader: BodyReader) => AsyncIterator<T>,
  isOutput: (event: T) => boolean,
): Promise<{ head: T[]; rest: AsyncIterator<T> }> {
  control.arm(timeouts.connectMs, 'upstream connect');
  try {
    const res = await post(request.upstream, request.payload, control.signal, request.path, request.headers);
    if (!res.ok) throw await errorFromStatus(res);
    if (!(res.header('content-type') ?? '').includes('text/event-stream')) {
      res.cancel();
      throw new AttemptError('upstream', 'upstream answered something that is not an event stream');
    }
    control.arm(timeouts.firstByteMs, 'upstream first token');
    const rest = eventsOf(res.reader());
    const head: T[] = [];
    for (;;) {
      const { value, done } = await rest.next();
      if (done) throw new AttemptError('upstream', 'upstream stream ended before any token');
      const output = isOutput(value);
      head.push(value);
      if (output) break;
    }
    control.disarm();
    return { head, rest };
  } catch (err) {
    control.disarm();
    throw failureOf(err, control);
  }
}

/** Opens a chat completions stream and reads up to the first meaningful chunk. Throws AttemptError. */
export const openStreamOnce = (upstream: Upstream, payload: string, control: AttemptControl, timeouts: Timeouts): Promise<OpenedUpstream> =>
  openEvents({ upstream, payload }, control, timeouts, chunksOf, isMeaningful);

/** One event of a Messages API stream: its name and its data as sent (forwarded unchanged). */
export interface MessageEvent {
  event: string;
  data: Chunk;
  raw: string;
}

/** Events that carry output: a token reached whoever reads them (`ping` and `message_start` do not). */
const MESSAGE_OUTPUT = new Set(['content_block_start', 'content_block_delta', 'message_delta', 'error']);

export interface OpenedMessages {
  head: MessageEvent[];
  rest: AsyncIterator<MessageEvent>;
}

/** Opens a Messages API stream on an anthropic-format backend and reads up to its first event with output. Throws AttemptError. */
export const openMessagesOnce = (upstream: Upstream, payload: string, headers: Record<string, string>, control: AttemptControl, timeouts: Timeouts): Promise<OpenedMessages> =>
  openEvents({ upstream, payload, path: '/v1/messages', headers }, control, timeouts, messageEventsOf, (event) => {
    // An error before any output is a failed attempt: another backend may answer.
    if (event.event === 'error') throw new AttemptError('upstream', `upstream stream error: ${event.raw}`);
    return MESSAGE_OUTPUT.has(event.event);
  });

/** The events of a Messages API stream until `message_stop` or the body's end. */
async function* messageEventsOf(reader: BodyReader): AsyncGenerator<MessageEvent> {
  const decoder = new TextDecoder();
  const pending: Array<{ event?: string; data: string }> = [];
  const parser = createParser({ onEvent: (e) => pending.push(e) });
  let finished = false;
  try {
    for (;;) {
      while (pending.length) {
        const { event, data } = pending.shift()!;
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch {
          throw new AttemptError('upstream', 'upstream sent an event that is not JSON');
        }
        if (!parsed || typeof parsed !== 'object') throw new AttemptError('upstream', 'upstream sent an event that is not an object');
        const name = event ?? String((parsed as Chunk).type ?? '');
        yield { event: name, data: parsed as Chunk, raw: data };
        if (name === 'message_stop') {
          finished = true;
          void finishAfterDone(reader);
          return;
        }
      }
      const { value, done } = await reader.read();
      if (done || !value) {
        parser.feed(`${decoder.decode()}\n\n`);
        if (!pending.length) return;
        continue;
      }
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    if (!finished) reader.cancel().catch(() => {});
  }
}

/** How long, and how many bytes, the end of a body may take to come after its [DONE]. */
const AFTER_DONE_MS = 500;
const AFTER_DONE_BYTES = 4096;

/**
 * After [DONE] only the body's end should follow: a chunked body's last chunk, which servers that
 * write each event as it is made (uvicorn, for one) send in a packet of its own. Reading it lets
 * the connection go back to the pool; cancelling the body at [DONE] closed it, and the next
 * stream to that backend opened a new one. More than a few bytes, or a late end, cancels.
 */
async function finishAfterDone(reader: BodyReader): Promise<void> {
  const late = setTimeout(() => reader.cancel().catch(() => {}), AFTER_DONE_MS);
  late.unref?.();
  try {
    for (let bytes = 0; bytes <= AFTER_DONE_BYTES; ) {
      const { done, value } = await reader.read();
      if (done) return;
      bytes += value?.length ?? 0;
    }
    await reader.cancel();
  } catch {
    // Cancelled or failed: the connection is closed either way; the stream was already complete.
  } finally {
    clearTimeout(late);
  }
}

/** Parsed chunks of an SSE body until [DONE]; read straight off the body (no TransformStream layers, which cost per chunk). */
async function* chunksOf(reader: BodyReader): AsyncGenerator<Chunk> {
  const decoder = new TextDecoder();
  const pending: string[] = [];
  const parser = createParser({ onEvent: (e) => pending.push(e.data) });
  let finishing = false;
  try {
    for (;;) {
      while (pending.length) {
        const data = pending.shift()!;
        if (data === '[DONE]') {
          finishing = true;
          void finishAfterDone(reader);
          return;
        }
        let chunk: unknown;
        try {
          chunk = JSON.parse(data);
        } catch {
          throw new AttemptError('upstream', 'upstream sent an event that is not JSON');
        }
        if (!chunk || typeof chunk !== 'object') throw new AttemptError('upstream', 'upstream sent an event that is not a chunk');
        if ((chunk as Chunk).error) throw new AttemptError('upstream', `upstream stream error: ${JSON.stringify((chunk as Chunk).error)}`);
        rawText.set(chunk as Chunk, data);
        yield chunk as Chunk;
      }
      const { value, done } = await reader.read();
      if (done || !value) {
        parser.feed(`${decoder.decode()}\n\n`);
        if (!pending.length) return;
        continue;
      }
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    if (!finishing) reader.cancel().catch(() => {});
  }
}

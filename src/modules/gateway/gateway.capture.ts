/**
 * A gateway request's capture (docs/captures.md), when its key or an admin rule asks for one:
 * it learns the usage record from the router, keeps the answer (the JSON sent, or a stream's text,
 * tool calls and usage as they pass) and, once the answer has ended, hands everything to the
 * captures module, which writes it off the request path. Only the body is kept, never headers,
 * so no credential is ever captured.
 */
import type { AppContext } from '../../app-context';
import { AppError, STATUS_OF_KIND } from '../../platform/errors';
import { newId } from '../../platform/ids';
import type { Chunk, UsageRecord } from '../metering';
import { type CaptureRecord, type CapturesService, StreamAnswer } from '../captures';

export type CaptureSink = Pick<CapturesService, 'shouldCapture' | 'record'>;

export interface RequestCapture {
  /** The capture's id (its row appears once it is written, just after the answer ends). */
  id: string;
  onUsage(record: UsageRecord): void;
  /** A JSON answer was sent: its text. */
  answered(json: string): void;
  /** The request failed with `err` before an answer. */
  failed(err: unknown): void;
  /** A stream's chunk passed; ended() once the stream is over, however it ended. */
  chunk(c: Chunk): void;
  ended(): void;
}

/** The request a capture is of: its caller, endpoint and body as received (its size too), and the capture it replays. */
export interface CaptureOf {
  userId: string;
  keyId: string | null;
  endpoint: CaptureRecord['endpoint'];
  body: Record<string, unknown>;
  bodyBytes: number;
  replayOf: string | null;
}

export function requestCapture(ctx: AppContext, sink: CaptureSink, what: CaptureOf): RequestCapture {
  const id = newId('cap');
  const started = performance.now();
  const createdAt = ctx.clock.now();
  const streamed = what.body.stream === true;
  let usage: UsageRecord | null = null;
  const stream = new StreamAnswer();
  let done = false;

  function finish(answerJson: string, status: number, truncated: boolean) {
    if (done) return;
    done = true;
    const asked = typeof what.body.model === 'string' ? what.body.model : '';
    sink.record({
      id,
      userId: what.userId,
      keyId: what.keyId,
      endpoint: what.endpoint,
      entrypoint: usage?.entrypoint ?? (what.replayOf ? 'replay' : asked),
      model: usage?.model ?? asked,
      status: usage?.status ?? status,
      latencyMs: usage?.latencyMs ?? Math.round(performance.now() - started),
      backend: usage?.backend ?? null,
      usageId: usage?.id ?? null,
      streamed,
      promptTokens: usage?.promptTokens ?? 0,
      completionTokens: usage?.completionTokens ?? 0,
      costMicros: usage?.costMicros ?? 0n,
      replayOf: what.replayOf,
      createdAt,
      request: what.body,
      requestBytes: what.bodyBytes,
      answerJson,
      answerTruncated: truncated,
    });
  }

  return {
    id,
    onUsage: (record) => {
      usage = record;
    },
    answered: (json) => finish(json, 200, false),
    failed: (err) => finish(JSON.stringify({ error: err instanceof AppError ? err.message : 'internal error' }), err instanceof AppError ? STATUS_OF_KIND[err.kind] : 500, false),
    chunk: (c) => stream.take(c),
    ended: () => finish(JSON.stringify(stream.result()), 200, stream.truncated),
  };
}

/** The capture of a request, or null when it is not captured (decided from memory: the key cache and the rules). */
export async function captureFor(ctx: AppContext, sink: CaptureSink | undefined, what: CaptureOf): Promise<RequestCapture | null> {
  if (!sink) return null;
  // A replay is always captured: the console compares it with its original. A capture never fails
  // a request: when the key's flag cannot be read (its cache entry gone, the database away), none.
  const model = typeof what.body.model === 'string' ? what.body.model : '';
  if (what.replayOf === null && !(await sink.shouldCapture(what, model).catch(() => false))) return null;
  return requestCapture(ctx, sink, what);
}

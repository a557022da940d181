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
  /** A JSON answer was sent. */
  answered(body: unknown): void;
  /** The request failed with `err` before an answer. */
  failed(err: unknown): void;
  /** A stream's chunk passed; ended() once the stream is over, however it ended. */
  chunk(c: Chunk): void;
  ended(): void;
}

export function requestCapture(
  ctx: AppContext,
  sink: CaptureSink,
  what: { userId: string; keyId: string | null; endpoint: CaptureRecord['endpoint']; body: Record<string, unknown>; replayOf: string | null },
): RequestCapture {
  const id = newId('cap');
  const started = performance.now();
  const createdAt = ctx.clock.now();
  const streamed = what.body.stream === true;
  let usage: UsageRecord | null = null;
  const stream = new StreamAnswer();
  let done = false;

  function finish(answer: unknown, status: number, truncated: boolean) {
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
      answer,
      answerTruncated: truncated,
    });
  }

  return {
    id,
    onUsage: (record) => {
      usage = record;
    },
    answered: (body) => finish(body, 200, false),
    failed: (err) => finish({ error: err instanceof AppError ? err.message : 'internal error' }, err instanceof AppError ? STATUS_OF_KIND[err.kind] : 500, false),
    chunk: (c) => stream.take(c),
    ended: () => finish(stream.result(), 200, stream.truncated),
  };
}

/** The capture of a request, or null when it is not captured (decided from memory: the key cache and the rules). */
export async function captureFor(
  ctx: AppContext,
  sink: CaptureSink | undefined,
  caller: { userId: string; keyId: string | null },
  endpoint: CaptureRecord['endpoint'],
  body: Record<string, unknown>,
  replayOf: string | null,
): Promise<RequestCapture | null> {
  if (!sink) return null;
  // A replay is always captured: the console compares it with its original. A capture never fails
  // a request: when the key's flag cannot be read (its cache entry gone, the database away), none.
  if (replayOf === null && !(await sink.shouldCapture(caller, typeof body.model === 'string' ? body.model : '').catch(() => false))) return null;
  return requestCapture(ctx, sink, { ...caller, endpoint, body, replayOf });
}

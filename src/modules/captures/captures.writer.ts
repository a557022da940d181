/**
 * Writes captures off the request path: a request hands its capture over when its answer has
 * ended, and returns at once. A bounded queue feeds a few writers, each sealing the bodies
 * (AES-256-GCM, key derived from SECRET_KEY for "captures"), storing them in the object store and
 * then inserting the metadata row. The queue is bounded in captures and in bytes (a request body
 * may be megabytes): when full, a capture is dropped and counted (cpd_captures_dropped_total).
 * Capture never slows or holds up a request.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AppContext } from '../../app-context';
import { secretBox } from '../../platform/crypto';
import { HotCounter } from '../../platform/metrics/hot';
import type { ObjectStore } from '../../platform/storage';
import { capped } from './captures.answer';
import { captures } from './captures.tables';

/** What a finished request leaves for its capture. */
export interface CaptureRecord {
  id: string;
  userId: string;
  keyId: string | null;
  endpoint: 'chat' | 'embeddings' | 'responses' | 'messages';
  entrypoint: string;
  model: string;
  status: number;
  latencyMs: number;
  backend: string | null;
  usageId: string | null;
  streamed: boolean;
  promptTokens: number;
  completionTokens: number;
  costMicros: bigint;
  replayOf: string | null;
  createdAt: Date;
  /** The request body as received (parsed JSON; never headers), and its size as received. */
  request: unknown;
  requestBytes: number;
  /** The answer's JSON text: the JSON sent, a stream's assembled answer, or {error}. */
  answerJson: string;
  /** The stream's assembled answer was cut at the size limit. */
  answerTruncated: boolean;
}

export interface StoredBodies {
  request: unknown;
  answer: unknown;
}

const QUEUE_MAX = 1000;
const QUEUE_MAX_BYTES = 64 * 1024 * 1024;
const WRITERS = 2;
const DAY_MS = 86_400_000;

const sizeOf = (r: CaptureRecord) => r.requestBytes + r.answerJson.length;

/** The object key of a capture's bodies: ids are mixed-case, object keys lower-case, so the id in hex. */
export const objectKeyOf = (id: string) => `captures/${Buffer.from(id).toString('hex')}`;

export function createCaptureWriter(ctx: AppContext, store: ObjectStore, retentionDays: () => number) {
  const { db } = ctx.database;
  let box: ReturnType<typeof secretBox> | null = null;
  const sealer = () => (box ??= secretBox(ctx.config.secretKey(), 'captures'));
  const dropped = new HotCounter('cpd_captures_dropped_total', 'Captures dropped because the capture queue was full or a write failed', ['reason']).register(ctx.metrics);
  const tmpDir = join(ctx.config.dataDir, 'tmp', 'captures');
  const queue: CaptureRecord[] = [];
  let queuedBytes = 0;
  let active = 0;
  let idle: Array<() => void> = [];

  /** Hands a capture over; never waits and never throws. */
  function enqueue(record: CaptureRecord): void {
    const bytes = sizeOf(record);
    if (queue.length >= QUEUE_MAX || queuedBytes + bytes > QUEUE_MAX_BYTES) {
      dropped.inc(['queue_full']);
      return;
    }
    queue.push(record);
    queuedBytes += bytes;
    if (active < WRITERS) void drain();
  }

  async function drain(): Promise<void> {
    active++;
    try {
      for (let next = queue.shift(); next; next = queue.shift()) {
        queuedBytes -= sizeOf(next);
        await write(next).catch((err) => {
          dropped.inc(['write_failed']);
          ctx.log.warn({ err, capture_id: next!.id }, 'could not store a capture');
        });
      }
    } finally {
      active--;
      if (active === 0 && queue.length === 0) {
        for (const wake of idle) wake();
        idle = [];
      }
    }
  }

  async function write(r: CaptureRecord): Promise<void> {
    const request = capped(JSON.stringify(r.request) ?? 'null');
    const answer = capped(r.answerJson);
    // The StoredBodies shape, put together from the two JSON texts (the answer's was made once, for the client).
    const sealed = sealer().seal(`{"request":${request.json},"answer":${answer.json}}`);
    const objectKey = objectKeyOf(r.id);
    await mkdir(tmpDir, { recursive: true });
    const tmp = join(tmpDir, `${objectKey.slice('captures/'.length)}.sealed`);
    try {
      await writeFile(tmp, sealed);
      await store.putFile(objectKey, tmp);
    } finally {
      await rm(tmp, { force: true });
    }
    await db.insert(captures).values({
      id: r.id,
      userId: r.userId,
      keyId: r.keyId,
      endpoint: r.endpoint,
      entrypoint: r.entrypoint,
      model: r.model,
      status: r.status,
      latencyMs: r.latencyMs,
      backend: r.backend,
      usageId: r.usageId,
      streamed: r.streamed,
      promptTokens: r.promptTokens,
      completionTokens: r.completionTokens,
      costMicros: r.costMicros,
      requestTruncated: request.truncated,
      responseTruncated: answer.truncated || r.answerTruncated,
      replayOf: r.replayOf,
      objectKey,
      createdAt: r.createdAt,
      expiresAt: new Date(r.createdAt.getTime() + retentionDays() * DAY_MS),
    });
  }

  /** A stored capture's bodies, opened. */
  async function readBodies(objectKey: string): Promise<StoredBodies> {
    const sealed = await new Response(store.read(objectKey)).text();
    return JSON.parse(sealer().open(sealed)) as StoredBodies;
  }

  /** Resolves when every capture handed over so far is written (or dropped): tests, shutdown. */
  const flush = () => (active === 0 && queue.length === 0 ? Promise.resolve() : new Promise<void>((resolve) => idle.push(resolve)));

  ctx.onShutdown(flush);
  return { enqueue, readBodies, flush };
}

export type CaptureWriter = ReturnType<typeof createCaptureWriter>;

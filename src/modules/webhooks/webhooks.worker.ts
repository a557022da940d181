/**
 * The delivery worker. Deliveries are rows: a due one (status pending, next_attempt_at passed, its
 * endpoint enabled) is claimed with SELECT … FOR UPDATE SKIP LOCKED by moving next_attempt_at past
 * the attempt's timeout, so with several replicas on one database each delivery is attempted by
 * one of them per schedule, and one killed mid-attempt (kill -9) leaves it due again once that
 * lease passes: at least once, across restarts. Each attempt POSTs the event with a fresh
 * Cpd-Signature and waits at most `timeoutMs`; a 2xx delivers it, anything else schedules the
 * next attempt after an exponential backoff (base × 2^(attempt−1), at most MAX_DELAY_MS). A
 * delivery still failing when its retry window (3 days) is over fails, and its endpoint is
 * disabled and its owner told (onEndpointDisabled).
 */
import { and, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError, rootMessage } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { VERSION } from '../../version';
import { deliveryTarget } from './webhooks.addresses';
import { secretSealer, signatureHeader } from './webhooks.signature';
import { webhookAttempts, webhookDeliveries, webhookEndpoints } from './webhooks.tables';

export const RETRY_WINDOW_MS = 3 * 24 * 3600_000;
const MAX_DELAY_MS = 6 * 3600_000;
/** Claimed past the timeout by this much, so a slow attempt's result is written before anyone else claims it. */
const LEASE_SLACK_MS = 5_000;
/** Deliveries claimed per round, attempted side by side. */
const BATCH = 20;

export interface WorkerOptions {
  /** First retry delay (default 10 s); tests make it small. */
  backoffBaseMs?: number;
  /** How long an attempt waits for the answer (default 10 s). */
  timeoutMs?: number;
  /** How often due deliveries are looked for (default 1 s). */
  pollMs?: number;
  /** The owner is told that deliveries failed for the whole retry window and the endpoint was disabled. */
  onEndpointDisabled?: (userId: string, url: string) => void | Promise<void>;
}

/** The delay before attempt n+1 after n failed ones. */
export function backoffDelay(failedAttempts: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** Math.max(0, failedAttempts - 1), MAX_DELAY_MS);
}

interface Claimed {
  id: string;
  attempts: number;
  window_ms: number;
  user_id: string;
  endpoint_id: string;
  url: string;
  secret_sealed: string;
  event_id: string;
  type: string;
  data: unknown;
  event_ms: number;
}

export function createDeliveryWorker(ctx: AppContext, opts: WorkerOptions = {}) {
  const { db } = ctx.database;
  const log = ctx.log;
  const baseMs = opts.backoffBaseMs ?? 10_000;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const pollMs = opts.pollMs ?? 1_000;
  const allowPrivate = ctx.config.webhooks.allowPrivate;
  const secrets = secretSealer(ctx.config.secretKey);
  // The origin only: a receiver's URL may carry its own token in the path or query.
  const onDisabled =
    opts.onEndpointDisabled ??
    ((userId: string, url: string) =>
      log.warn({ user_id: userId, origin: new URL(url).origin }, 'webhook endpoint disabled: deliveries failed for 3 days'));
  /** Aborted at shutdown: an attempt cut short is not recorded, and is made again once its lease passes. */
  const stopping = new AbortController();

  /** Claims the due deliveries (this replica's until the lease passes), with their event and endpoint. */
  async function claim(): Promise<Claimed[]> {
    const now = ctx.clock.now();
    const leaseUntil = new Date(now.getTime() + timeoutMs + LEASE_SLACK_MS).toISOString();
    return ctx.database.query<Claimed>(sql`
      with due as (
        select d.id from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id and e.enabled
        where d.status = 'pending' and d.next_attempt_at <= ${now.toISOString()}::timestamptz
        order by d.next_attempt_at
        limit ${BATCH}
        for update of d skip locked
      ), claimed as (
        update webhook_deliveries d set next_attempt_at = ${leaseUntil}::timestamptz from due where d.id = due.id
        returning d.id, d.attempts, d.window_started_at, d.user_id, d.endpoint_id, d.event_id
      )
      select c.id, c.attempts, (extract(epoch from c.window_started_at) * 1000)::float8 as window_ms, c.user_id, c.endpoint_id,
        e.url, e.secret_sealed, c.event_id, v.type, v.data, (extract(epoch from v.created_at) * 1000)::float8 as event_ms
      from claimed c join webhook_endpoints e on e.id = c.endpoint_id join webhook_events v on v.id = c.event_id`);
  }

  /** One POST; answers the status (null: no answer) and the error in words. */
  async function post(d: Claimed, body: string): Promise<{ statusCode: number | null; error: string | null } | null> {
    const url = new URL(d.url);
    try {
      // Checked again at every attempt (the name may resolve elsewhere since it was saved), and
      // the connection made to the address checked.
      const target = await deliveryTarget(url, allowPrivate);
      const res = await fetch(target.url, {
        method: 'POST',
        headers: {
          ...(target.host ? { host: target.host } : {}),
          'content-type': 'application/json',
          'user-agent': `cpd-webhooks/${VERSION}`,
          'cpd-event-id': d.event_id,
          'cpd-signature': signatureHeader(secrets.open(d.secret_sealed), body, ctx.clock.now()),
        },
        body,
        // A redirect is an answer that is not 2xx: following it could reach an address never checked.
        redirect: 'manual',
        ...(target.serverName ? { tls: { serverName: target.serverName } } : {}),
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), stopping.signal]),
      });
      await res.body?.cancel().catch(() => {});
      return { statusCode: res.status, error: res.ok ? null : `HTTP ${res.status}` };
    } catch (err) {
      if (stopping.signal.aborted) return null;
      if (err instanceof AppError) return { statusCode: null, error: err.message };
      const name = (err as Error)?.name;
      return {
        statusCode: null,
        error: name === 'TimeoutError' || name === 'AbortError' ? `no answer within ${timeoutMs / 1000} s` : rootMessage(err),
      };
    }
  }

  async function attempt(d: Claimed): Promise<void> {
    const body = JSON.stringify({
      id: d.event_id,
      type: d.type,
      created_at: new Date(Math.round(Number(d.event_ms))).toISOString(),
      data: d.data,
    });
    const startedAt = ctx.clock.now();
    const started = performance.now();
    const outcome = await post(d, body);
    if (!outcome) return;
    const { statusCode, error } = outcome;
    const durationMs = Math.round(performance.now() - started);
    const attempts = d.attempts + 1;
    const now = ctx.clock.now();
    const delivered = error === null;
    const next = new Date(now.getTime() + backoffDelay(attempts, baseMs));
    const windowOver = !delivered && next.getTime() > Number(d.window_ms) + RETRY_WINDOW_MS;
    const status = delivered ? 'delivered' : windowOver ? 'failed' : 'pending';
    const disabled = await db.transaction(async (tx) => {
      const still = await tx
        .update(webhookDeliveries)
        .set({
          status,
          attempts,
          nextAttemptAt: status === 'pending' ? next : now,
          lastAttemptAt: startedAt,
          lastStatusCode: statusCode,
          lastError: error,
          lastDurationMs: durationMs,
        })
        .where(eq(webhookDeliveries.id, d.id))
        .returning({ id: webhookDeliveries.id });
      if (!still.length) return false; // its endpoint was deleted meanwhile
      await tx
        .insert(webhookAttempts)
        .values({ id: newId('wha'), deliveryId: d.id, attemptedAt: startedAt, statusCode, error, durationMs });
      if (!windowOver) return false;
      const off = await tx
        .update(webhookEndpoints)
        .set({ enabled: false, disabledReason: 'deliveries failed for 3 days', updatedAt: now })
        .where(and(eq(webhookEndpoints.id, d.endpoint_id), eq(webhookEndpoints.enabled, true)))
        .returning({ id: webhookEndpoints.id });
      return off.length > 0;
    });
    if (!delivered)
      log.info({ delivery_id: d.id, event_id: d.event_id, attempts, status_code: statusCode, error, status }, 'webhook delivery failed');
    if (disabled) {
      try {
        await onDisabled(d.user_id, d.url);
      } catch (err) {
        log.error({ err, endpoint_id: d.endpoint_id }, 'telling the owner of a disabled webhook endpoint failed');
      }
    }
  }

  /** Claims what is due and attempts it; answers how many were attempted. Tests call it to step the worker. */
  async function runOnce(): Promise<number> {
    const claimed = await claim();
    await Promise.all(
      claimed.map((d) => attempt(d).catch((err) => log.error({ err, delivery_id: d.id }, 'webhook delivery attempt failed to record'))),
    );
    return claimed.length;
  }

  let timer: ReturnType<typeof setTimeout> | null = null;
  let running: Promise<void> | null = null;
  /** Polling only between start() and shutdown (a test that steps the worker never starts it). */
  let polling = false;
  function schedule(delayMs: number) {
    if (!polling) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(loop, delayMs);
    timer.unref?.();
  }
  function loop() {
    timer = null;
    if (running) return;
    running = (async () => {
      let attempted = 0;
      try {
        attempted = await runOnce();
      } catch (err) {
        log.warn({ err }, 'webhook deliveries could not be claimed');
      } finally {
        running = null;
      }
      // A full batch: more may be due at once.
      schedule(attempted === BATCH ? 0 : pollMs);
    })();
  }

  return {
    runOnce,
    /** Starts looking for due deliveries every pollMs until shutdown. */
    start() {
      polling = true;
      // Not at once: start-up has the database's first connections to itself (docs/design/start-up.md).
      schedule(pollMs);
      ctx.onShutdown(async () => {
        polling = false;
        if (timer) clearTimeout(timer);
        stopping.abort();
        await running;
      });
    },
    /** Looks for due deliveries now (a manual retry, a re-enabled endpoint), when polling. */
    wake: () => schedule(0),
  };
}

export type DeliveryWorker = ReturnType<typeof createDeliveryWorker>;

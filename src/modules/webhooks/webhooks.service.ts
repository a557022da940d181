/**
 * A user's webhook endpoints (create with a secret shown once, list, read, change, delete), their
 * delivery log and manual retries, and the event sink billing and metering record into.
 */
import { and, desc, eq, inArray } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { decodeCursor, olderThan, page } from '../../platform/cursor';
import type { DbOrTx } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { newId, randomBase62 } from '../../platform/ids';
import { checkEndpointUrl } from './webhooks.addresses';
import { createEventRecorder, EVENT_TYPES, type EventInput, type EventType } from './webhooks.events';
import { secretSealer } from './webhooks.signature';
import { webhookAttempts, webhookDeliveries, webhookEndpoints, webhookEvents } from './webhooks.tables';
import { createDeliveryWorker, type WorkerOptions } from './webhooks.worker';

/** Endpoints per account: enough for every environment a customer runs, few enough that an event's fan-out stays small. */
const MAX_ENDPOINTS = 20;

type Endpoint = typeof webhookEndpoints.$inferSelect;
type Delivery = typeof webhookDeliveries.$inferSelect;

export interface EndpointInput {
  url?: string;
  events?: string[];
  enabled?: boolean;
}

function checkEvents(events: string[]): EventType[] {
  if (events.length === 0) throw new AppError('invalid', 'events must name at least one event');
  const unknown = events.find((e) => !(EVENT_TYPES as readonly string[]).includes(e));
  if (unknown !== undefined) throw new AppError('invalid', `events: unknown event "${unknown}" (one of ${EVENT_TYPES.join(', ')})`);
  return [...new Set(events)] as EventType[];
}

export function createWebhooksService(ctx: AppContext, opts: WorkerOptions = {}) {
  const { db } = ctx.database;
  const recorder = createEventRecorder(ctx);
  const worker = createDeliveryWorker(ctx, opts);
  const allowPrivate = ctx.config.webhooks.allowPrivate;
  const secrets = secretSealer(ctx.config.secretKey);

  async function requireOwn(userId: string, id: string): Promise<Endpoint> {
    const [e] = await db
      .select()
      .from(webhookEndpoints)
      .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.userId, userId)));
    if (!e) throw new AppError('not_found', 'webhook not found');
    return e;
  }

  async function create(userId: string, input: { url: string; events: string[] }) {
    const events = checkEvents(input.events);
    const url = await checkEndpointUrl(input.url, allowPrivate);
    if ((await db.$count(webhookEndpoints, eq(webhookEndpoints.userId, userId))) >= MAX_ENDPOINTS)
      throw new AppError('conflict', `an account may have at most ${MAX_ENDPOINTS} webhook endpoints`);
    const secret = `whsec_${randomBase62(32)}`;
    const now = ctx.clock.now();
    const [row] = await db
      .insert(webhookEndpoints)
      .values({
        id: newId('wh'),
        userId,
        url,
        events,
        secretSealed: secrets.seal(secret),
        enabled: true,
        disabledReason: null,
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return { ...view(row!), secret };
  }

  async function list(userId: string) {
    const rows = await db
      .select()
      .from(webhookEndpoints)
      .where(eq(webhookEndpoints.userId, userId))
      .orderBy(desc(webhookEndpoints.createdAt), desc(webhookEndpoints.id));
    return { webhooks: rows.map(view) };
  }

  const get = async (userId: string, id: string) => view(await requireOwn(userId, id));

  /** Changes the URL, events or enabled; enabling again restarts the retry window of its deliveries still pending. */
  async function update(userId: string, id: string, input: EndpointInput) {
    const events = input.events === undefined ? undefined : checkEvents(input.events);
    const url = input.url === undefined ? undefined : await checkEndpointUrl(input.url, allowPrivate);
    const e = await requireOwn(userId, id);
    const now = ctx.clock.now();
    const enabling = input.enabled === true && !e.enabled;
    const row = await db.transaction(async (tx) => {
      const [next] = await tx
        .update(webhookEndpoints)
        .set({
          ...(url !== undefined ? { url } : {}),
          ...(events !== undefined ? { events } : {}),
          ...(input.enabled !== undefined ? { enabled: input.enabled, disabledReason: null } : {}),
          updatedAt: now,
        })
        .where(eq(webhookEndpoints.id, e.id))
        .returning();
      if (enabling)
        await tx
          .update(webhookDeliveries)
          .set({ windowStartedAt: now, nextAttemptAt: now })
          .where(and(eq(webhookDeliveries.endpointId, e.id), eq(webhookDeliveries.status, 'pending')));
      return next!;
    });
    if (enabling) worker.wake();
    return view(row);
  }

  /** Deletes the endpoint with its deliveries and their log (nothing more is sent to it). */
  async function remove(userId: string, id: string): Promise<void> {
    const e = await requireOwn(userId, id);
    await db.transaction(async (tx) => {
      await tx
        .delete(webhookAttempts)
        .where(
          inArray(
            webhookAttempts.deliveryId,
            tx.select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(eq(webhookDeliveries.endpointId, e.id)),
          ),
        );
      await tx.delete(webhookDeliveries).where(eq(webhookDeliveries.endpointId, e.id));
      await tx.delete(webhookEndpoints).where(eq(webhookEndpoints.id, e.id));
    });
  }

  /** The endpoint's deliveries, newest first, each with its event's type and every attempt. */
  async function deliveries(userId: string, id: string, query: { limit: number; cursor?: string }) {
    const e = await requireOwn(userId, id);
    const after = decodeCursor(query.cursor);
    const rows = await db
      .select({ delivery: webhookDeliveries, type: webhookEvents.type })
      .from(webhookDeliveries)
      .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
      .where(
        and(eq(webhookDeliveries.endpointId, e.id), olderThan(webhookDeliveries, webhookDeliveries.createdAt, webhookDeliveries.id, after)),
      )
      .orderBy(desc(webhookDeliveries.createdAt), desc(webhookDeliveries.id))
      .limit(query.limit + 1);
    const { items, nextCursor } = page(
      rows.map((r) => ({ ...r.delivery, type: r.type })),
      query.limit,
    );
    const log = items.length
      ? await db
          .select()
          .from(webhookAttempts)
          .where(
            inArray(
              webhookAttempts.deliveryId,
              items.map((d) => d.id),
            ),
          )
          .orderBy(webhookAttempts.attemptedAt)
      : [];
    return {
      deliveries: items.map((d) => ({
        ...deliveryView(d, d.type),
        log: log
          .filter((a) => a.deliveryId === d.id)
          .map((a) => ({
            attempted_at: a.attemptedAt.toISOString(),
            status_code: a.statusCode,
            error: a.error,
            duration_ms: a.durationMs,
          })),
      })),
      next_cursor: nextCursor,
    };
  }

  /** Sends a delivery again now (delivered, failed or waiting), with a new retry window; the endpoint must be enabled. */
  async function retry(userId: string, id: string, deliveryId: string) {
    const e = await requireOwn(userId, id);
    if (!e.enabled) throw new AppError('conflict', 'the webhook is disabled: enable it first');
    const now = ctx.clock.now();
    const [d] = await db
      .update(webhookDeliveries)
      .set({ status: 'pending', nextAttemptAt: now, windowStartedAt: now })
      .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.endpointId, e.id)))
      .returning();
    if (!d) throw new AppError('not_found', 'delivery not found');
    const [ev] = await db.select({ type: webhookEvents.type }).from(webhookEvents).where(eq(webhookEvents.id, d.eventId));
    worker.wake();
    return deliveryView(d, ev?.type ?? '');
  }

  return {
    create,
    list,
    get,
    update,
    remove,
    deliveries,
    retry,
    /** The event sink billing and metering are given: records an event in the caller's transaction. */
    events: { record: (on: DbOrTx, input: EventInput) => recorder.record(on, input) },
    /**
     * balance.low for `userId`: the balance and the threshold it fell below, in major units of
     * the site currency. The low-balance check calls it (once per crossing: it decides when).
     */
    emitBalanceLow: (userId: string, amounts: { balance: number; threshold: number }, on: DbOrTx = db) =>
      recorder.record(on, {
        userId,
        type: 'balance.low',
        data: { balance: amounts.balance, threshold: amounts.threshold, currency: ctx.config.currency },
      }),
    /** Starts the delivery worker (cpd serve and the app: every replica runs one; claims keep them apart). */
    startWorker: () => worker.start(),
    /** One round of the worker (tests step it instead of waiting for its poll). */
    deliverDue: () => worker.runOnce(),
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;

function view(e: Endpoint) {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    enabled: e.enabled,
    disabled_reason: e.disabledReason,
    created_at: e.createdAt.toISOString(),
  };
}

function deliveryView(d: Delivery, type: string) {
  return {
    id: d.id,
    event_id: d.eventId,
    event_type: type,
    status: d.status,
    attempts: d.attempts,
    next_attempt_at: d.status === 'pending' ? d.nextAttemptAt.toISOString() : null,
    last_attempt_at: d.lastAttemptAt?.toISOString() ?? null,
    last_status_code: d.lastStatusCode,
    last_error: d.lastError,
    last_duration_ms: d.lastDurationMs,
    created_at: d.createdAt.toISOString(),
  };
}

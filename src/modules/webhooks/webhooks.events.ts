/**
 * Events: recorded in the caller's transaction (the one that moves the money), each with one
 * pending delivery per enabled endpoint of its user that takes its type, in one statement. An
 * event rolled back with its transaction was never recorded; one committed is delivered at least
 * once, whatever happens to the process afterwards.
 */
import { sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';
import { newId } from '../../platform/ids';

export const EVENT_TYPES = ['payment.paid', 'payment.refunded', 'balance.low', 'key.spend_limit_reached', 'invoice.issued'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface EventInput {
  userId: string;
  type: EventType;
  /** The payload's `data`: plain JSON, never a credential (no session token, API key or upstream key). */
  data: Record<string, unknown>;
  /** An event that may be noticed more than once is recorded once per key (null: every time). */
  dedupeKey?: string;
}

export function createEventRecorder(ctx: AppContext) {
  /** Records the event and its deliveries on `on` (a transaction, or the pool); answers the event id, or null when deduplicated. */
  async function record(on: DbOrTx, input: EventInput): Promise<string | null> {
    const id = newId('evt');
    const now = ctx.clock.now().toISOString();
    const rows = await ctx.database.query<{ id: string }>(
      sql`
        with ev as (
          insert into webhook_events (id, user_id, type, data, dedupe_key, created_at)
          values (${id}, ${input.userId}, ${input.type}, ${JSON.stringify(input.data)}::jsonb, ${input.dedupeKey ?? null}, ${now}::timestamptz)
          on conflict (dedupe_key) do nothing
          returning id, user_id, type, created_at
        ), deliveries as (
          insert into webhook_deliveries (id, endpoint_id, event_id, user_id, status, attempts, next_attempt_at, window_started_at, created_at)
          select 'dlv_' || substr(md5(ev.id || e.id), 1, 24), e.id, ev.id, ev.user_id, 'pending', 0, ev.created_at, ev.created_at, ev.created_at
          from ev join webhook_endpoints e on e.user_id = ev.user_id and e.enabled and ev.type = any(e.events)
        )
        select id from ev`,
      on,
    );
    return rows[0]?.id ?? null;
  }

  return { record };
}

export type EventRecorder = ReturnType<typeof createEventRecorder>;

import { t } from 'elysia';
import { EVENT_TYPES } from './webhooks.events';

export const IdParams = t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) });
export const DeliveryParams = t.Object({
  id: t.String({ minLength: 1, maxLength: 64 }),
  delivery_id: t.String({ minLength: 1, maxLength: 64 }),
});

// Event names are checked by the service, so an unknown one is named in the 400.
const Events = t.Array(t.String({ maxLength: 64 }), { maxItems: 20, description: `any of ${EVENT_TYPES.join(', ')}` });
const Url = t.String({
  minLength: 1,
  maxLength: 2048,
  description: 'https:// URL that resolves to public addresses only (WEBHOOK_ALLOW_PRIVATE=true lifts both)',
});

export const CreateBody = t.Object({ url: Url, events: Events });
export const PatchBody = t.Object({ url: t.Optional(Url), events: t.Optional(Events), enabled: t.Optional(t.Boolean()) });

export const Webhook = t.Object({
  id: t.String(),
  url: t.String(),
  events: t.Array(t.String()),
  enabled: t.Boolean(),
  disabled_reason: t.Union([t.String(), t.Null()], { description: 'set when the server disabled it (deliveries failed for 3 days)' }),
  created_at: t.String(),
});
export const CreatedWebhook = t.Composite([
  Webhook,
  t.Object({ secret: t.String({ description: 'signing secret, shown only in this answer' }) }),
]);
export const WebhookList = t.Object({ webhooks: t.Array(Webhook) });

export const DeliveryQuery = t.Object({
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 200, default: 50 })),
  cursor: t.Optional(t.String({ minLength: 1 })),
});

const DeliveryFields = {
  id: t.String(),
  event_id: t.String(),
  event_type: t.String(),
  status: t.String({ description: 'pending | delivered | failed' }),
  attempts: t.Integer(),
  next_attempt_at: t.Union([t.String(), t.Null()]),
  last_attempt_at: t.Union([t.String(), t.Null()]),
  last_status_code: t.Union([t.Integer(), t.Null()]),
  last_error: t.Union([t.String(), t.Null()]),
  last_duration_ms: t.Union([t.Integer(), t.Null()]),
  created_at: t.String(),
};
export const Delivery = t.Object(DeliveryFields);
const Attempt = t.Object({
  attempted_at: t.String(),
  status_code: t.Union([t.Integer(), t.Null()]),
  error: t.Union([t.String(), t.Null()]),
  duration_ms: t.Integer(),
});
export const DeliveryList = t.Object({
  deliveries: t.Array(t.Object({ ...DeliveryFields, log: t.Array(Attempt) })),
  next_cursor: t.Union([t.String(), t.Null()]),
});

export { EVENT_TYPES, type EventInput, type EventType } from './webhooks.events';
export { webhooksRoutes } from './webhooks.routes';
export { createWebhooksService, type WebhooksService } from './webhooks.service';
export { backoffDelay, RETRY_WINDOW_MS, type WorkerOptions } from './webhooks.worker';

/**
 * /api/webhooks: a signed-in user's endpoints and their delivery log. Session only, as API keys
 * are managed: a key lives in scripts and servers, and should not be able to send its account's
 * payment notices elsewhere.
 */
import { Elysia } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import * as s from './webhooks.schemas';
import type { WebhooksService } from './webhooks.service';

export const webhooksRoutes = (deps: { auth: ReturnType<typeof authPlugin>; webhooks: WebhooksService }) => {
  const { webhooks } = deps;
  const tags = ['webhooks'];
  return new Elysia({ name: 'cpd/webhooks' })
    .use(deps.auth)
    .get('/api/webhooks', ({ caller }) => webhooks.list(caller.userId), {
      auth: ['session'],
      response: { 200: s.WebhookList },
      detail: { summary: 'Your webhook endpoints', tags },
    })
    .post(
      '/api/webhooks',
      async ({ caller, body, set }) => {
        const created = await webhooks.create(caller.userId, body);
        set.status = 201;
        return created;
      },
      {
        auth: ['session'],
        body: s.CreateBody,
        response: { 201: s.CreatedWebhook },
        detail: { summary: 'Add an endpoint; its signing secret is shown once', tags },
      },
    )
    .get('/api/webhooks/:id', ({ caller, params }) => webhooks.get(caller.userId, params.id), {
      auth: ['session'],
      params: s.IdParams,
      response: { 200: s.Webhook },
      detail: { summary: 'One endpoint', tags },
    })
    .patch('/api/webhooks/:id', ({ caller, params, body }) => webhooks.update(caller.userId, params.id, body), {
      auth: ['session'],
      params: s.IdParams,
      body: s.PatchBody,
      response: { 200: s.Webhook },
      detail: { summary: 'Change its URL or events, disable or enable it', tags },
    })
    .delete(
      '/api/webhooks/:id',
      async ({ caller, params, set }) => {
        await webhooks.remove(caller.userId, params.id);
        set.status = 204;
      },
      { auth: ['session'], params: s.IdParams, detail: { summary: 'Delete an endpoint and its delivery log', tags } },
    )
    .get(
      '/api/webhooks/:id/deliveries',
      ({ caller, params, query }) => webhooks.deliveries(caller.userId, params.id, { limit: query.limit ?? 50, cursor: query.cursor }),
      {
        auth: ['session'],
        params: s.IdParams,
        query: s.DeliveryQuery,
        response: { 200: s.DeliveryList },
        detail: { summary: 'Its deliveries, newest first, with every attempt', tags },
      },
    )
    .post(
      '/api/webhooks/:id/deliveries/:delivery_id/retry',
      async ({ caller, params, set }) => {
        const delivery = await webhooks.retry(caller.userId, params.id, params.delivery_id);
        set.status = 202;
        return delivery;
      },
      {
        auth: ['session'],
        params: s.DeliveryParams,
        response: { 202: s.Delivery },
        detail: { summary: 'Send a delivery again now', tags },
      },
    );
};

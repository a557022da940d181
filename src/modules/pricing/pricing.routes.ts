import { Elysia } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import type { AuditService } from '../audit';
import { GpuPricesBody, ModelPricesBody, PriceGroupsBody, PricingQuery } from './pricing.schemas';
import type { PricingService } from './pricing.service';

export const pricingRoutes = (deps: { auth: ReturnType<typeof authPlugin>; pricing: PricingService; audit: AuditService }) =>
  new Elysia({ name: 'cpd/pricing' })
    .use(deps.auth)
    .get('/api/pricing', ({ query }) => deps.pricing.catalog(query.limit), {
      query: PricingQuery,
      detail: { summary: 'Public pricing catalog (models and GPUs) in the site currency', tags: ['pricing'] },
    })
    .put(
      '/api/admin/billing/pricing/models',
      async ({ caller, body }) => {
        const saved = await deps.pricing.setModelPrices(body.models);
        await deps.audit.record({ actor: { userId: caller.userId, email: caller.email }, action: 'pricing.models', target: 'pricing', details: { models: body.models } });
        return saved;
      },
      {
      auth: ['admin'],
      body: ModelPricesBody,
      detail: { summary: 'Replace the model price list', tags: ['pricing'] },
      },
    )
    .put(
      '/api/admin/billing/pricing/gpus',
      async ({ caller, body }) => {
        const saved = await deps.pricing.setGpuPrices(body.gpus);
        await deps.audit.record({ actor: { userId: caller.userId, email: caller.email }, action: 'pricing.gpus', target: 'pricing', details: { gpus: body.gpus } });
        return saved;
      },
      { auth: ['admin'], body: GpuPricesBody, detail: { summary: 'Replace the GPU price list', tags: ['pricing'] } },
    )
    .get('/api/billing/prices', ({ caller }) => deps.pricing.pricesFor(caller.userId), {
      auth: ['session', 'key'],
      detail: { summary: "The caller's price group and every model at the prices they pay", tags: ['pricing'] },
    })
    .get('/api/admin/billing/price-groups', () => deps.pricing.groups.list(), {
      auth: ['admin'],
      detail: { summary: 'Price groups (default, ×1, always among them)', tags: ['pricing'] },
    })
    .put(
      '/api/admin/billing/price-groups',
      async ({ caller, body }) => {
        const saved = await deps.pricing.groups.replace(body.groups);
        await deps.audit.record({ actor: { userId: caller.userId, email: caller.email }, action: 'pricing.groups', target: 'price-groups', details: { groups: body.groups } });
        return saved;
      },
      { auth: ['admin'], body: PriceGroupsBody, detail: { summary: 'Replace the price groups; members of a removed group go back to default', tags: ['pricing'] } },
    );

import { Elysia } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import { GpuPricesBody, ModelPricesBody, PricingQuery } from './pricing.schemas';
import type { PricingService } from './pricing.service';

export const pricingRoutes = (deps: { auth: ReturnType<typeof authPlugin>; pricing: PricingService }) =>
  new Elysia({ name: 'cpd/pricing' })
    .use(deps.auth)
    .get('/api/pricing', ({ query }) => deps.pricing.catalog(query.limit), {
      query: PricingQuery,
      detail: { summary: 'Public pricing catalog (models and GPUs) in the site currency', tags: ['pricing'] },
    })
    .put('/api/admin/billing/pricing/models', ({ body }) => deps.pricing.setModelPrices(body.models), {
      auth: ['admin'],
      body: ModelPricesBody,
      detail: { summary: 'Replace the model price list', tags: ['pricing'] },
    })
    .put('/api/admin/billing/pricing/gpus', ({ body }) => deps.pricing.setGpuPrices(body.gpus), {
      auth: ['admin'],
      body: GpuPricesBody,
      detail: { summary: 'Replace the GPU price list', tags: ['pricing'] },
    });

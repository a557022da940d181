import { Elysia } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import type { createCostReport } from './router.cost';
import { BackendsBody, CostQuery, CostResponse } from './router.schemas';
import type { RouterService } from './router.service';

export const routerRoutes = (deps: { auth: ReturnType<typeof authPlugin>; router: RouterService; cost: ReturnType<typeof createCostReport> }) =>
  new Elysia({ name: 'cpd/router' })
    .use(deps.auth)
    // Admin scope (everyone's usage and emails) needs an admin session, as every admin route does:
    // an admin's API key, which lives in scripts and servers, sees its owner's usage only.
    .get('/v1/router/cost', ({ caller, query }) => deps.cost({ userId: caller.userId, isAdmin: caller.isAdmin && caller.via !== 'key' }, query), {
      auth: ['session', 'key'],
      query: CostQuery,
      response: { 200: CostResponse },
      detail: { summary: 'Aggregated router cost in USD: own usage, or everyone\'s for an admin', tags: ['router'] },
    })
    .get('/api/admin/router/backends', () => ({ backends: deps.router.listBackends() }), {
      auth: ['admin'],
      detail: { summary: 'Router backends and their health; source is env, admin or engine (API keys are never shown)', tags: ['router'] },
    })
    .put('/api/admin/router/backends', async ({ body }) => ({ backends: await deps.router.replaceBackends(body.backends) }), {
      auth: ['admin'],
      body: BackendsBody,
      detail: { summary: 'Replace the admin-managed backends; every replica uses them within a second', tags: ['router'] },
    });

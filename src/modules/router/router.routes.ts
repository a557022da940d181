import { Elysia, t } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import type { createCostReport } from './router.cost';
import { BackendsBody, CostQuery, CostResponse, UsageQuery, UsageResponse } from './router.schemas';
import type { RouterService } from './router.service';
import type { UsageLog } from './router.usage-log';
import type { AuditService } from '../audit';

export const routerRoutes = (deps: { auth: ReturnType<typeof authPlugin>; router: RouterService; cost: ReturnType<typeof createCostReport>; usage: UsageLog; audit: AuditService }) =>
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
    .get('/api/usage', ({ caller, query }) => deps.usage.list(caller.userId, query), {
      auth: ['session', 'key'],
      query: UsageQuery,
      response: { 200: UsageResponse },
      detail: { summary: 'Your requests one by one, newest first', tags: ['router'] },
    })
    .get(
      '/api/usage/export.csv',
      ({ caller, query }) =>
        new Response(deps.usage.exportCsv(caller.userId, query), {
          headers: { 'content-type': 'text/csv; charset=utf-8', 'content-disposition': 'attachment; filename="usage.csv"' },
        }),
      {
        auth: ['session', 'key'],
        query: t.Omit(UsageQuery, ['limit', 'cursor']),
        detail: { summary: 'Your requests as CSV (RFC 4180), streamed', tags: ['router'] },
      },
    )
    .get('/api/admin/router/backends', () => ({ backends: deps.router.listBackends() }), {
      auth: ['admin'],
      detail: { summary: 'Router backends and their health; source is env, admin or engine (API keys are never shown)', tags: ['router'] },
    })
    .put(
      '/api/admin/router/backends',
      async ({ caller, body }) => {
        const backends = await deps.router.replaceBackends(body.backends);
        // The API keys are write-only secrets: the audit entry says only whether one was given.
        const details = { backends: body.backends.map(({ api_key, ...b }) => ({ ...b, api_key: api_key !== undefined })) };
        await deps.audit.record({ actor: { userId: caller.userId, email: caller.email }, action: 'router.backends', target: 'router', details });
        return { backends };
      },
      {
        auth: ['admin'],
        body: BackendsBody,
        detail: { summary: 'Replace the admin-managed backends; every replica uses them within a second', tags: ['router'] },
      },
    );

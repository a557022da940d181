import { Elysia, t } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import type { createCostReport } from './usage.cost';
import type { UsageLog } from './usage.log';
import { CostQuery, CostResponse, UsageQuery, UsageResponse } from './usage.schemas';

export const usageRoutes = (deps: { auth: ReturnType<typeof authPlugin>; cost: ReturnType<typeof createCostReport>; usage: UsageLog }) =>
  new Elysia({ name: 'cpd/usage' })
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
    );

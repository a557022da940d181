import { Elysia, t } from 'elysia';
import { type authPlugin, type Caller, recordsOwner } from '../../platform/http/auth';
import type { createCostReport } from './usage.cost';
import type { UsageLog } from './usage.log';
import { CostQuery, CostResponse, UsageQuery, UsageResponse } from './usage.schemas';

export interface UsageRoutesDeps {
  auth: ReturnType<typeof authPlugin>;
  cost: ReturnType<typeof createCostReport>;
  usage: UsageLog;
  /** The wallet whose usage is read: the caller's, or (org_id) an organization's (its owners and admins; orgs). */
  walletOf?: (userId: string, orgId: string | undefined) => Promise<string>;
}

export const usageRoutes = (deps: UsageRoutesDeps) => {
  const walletOf = async (caller: Caller, orgId: string | undefined) => {
    const own = recordsOwner(caller);
    return orgId && deps.walletOf ? deps.walletOf(own, orgId) : own;
  };
  return new Elysia({ name: 'cpd/usage' })
    .use(deps.auth)
    // Admin scope (everyone's usage and emails) needs an admin session, as every admin route does:
    // an admin's API key, which lives in scripts and servers, sees its owner's usage only. With
    // org_id: the organization's usage, also by member.
    .get('/v1/router/cost', async ({ caller, query }) => {
      const { org_id, ...rest } = query;
      if (org_id) return deps.cost({ userId: await walletOf(caller, org_id), isAdmin: false, org: true }, rest);
      return deps.cost({ userId: recordsOwner(caller), isAdmin: caller.isAdmin && caller.via !== 'key' }, rest);
    }, {
      auth: ['session', 'key'],
      query: CostQuery,
      response: { 200: CostResponse },
      detail: { summary: 'Aggregated router cost in USD: own usage, or everyone\'s for an admin', tags: ['router'] },
    })
    .get('/api/usage', async ({ caller, query }) => {
      const { org_id, ...rest } = query;
      return deps.usage.list(await walletOf(caller, org_id), rest);
    }, {
      auth: ['session', 'key'],
      query: UsageQuery,
      response: { 200: UsageResponse },
      detail: { summary: 'Your requests one by one, newest first', tags: ['router'] },
    })
    .get(
      '/api/usage/export.csv',
      async ({ caller, query }) => {
        const { org_id, ...rest } = query;
        return new Response(deps.usage.exportCsv(await walletOf(caller, org_id), rest), {
          headers: { 'content-type': 'text/csv; charset=utf-8', 'content-disposition': 'attachment; filename="usage.csv"' },
        });
      },
      {
        auth: ['session', 'key'],
        query: t.Omit(UsageQuery, ['limit', 'cursor']),
        detail: { summary: 'Your requests as CSV (RFC 4180), streamed', tags: ['router'] },
      },
    );
};

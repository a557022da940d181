import { Elysia } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import { BackendsBody } from './router.schemas';
import type { RouterService } from './router.service';
import type { AuditService } from '../audit';

export const routerRoutes = (deps: { auth: ReturnType<typeof authPlugin>; router: RouterService; audit: AuditService }) =>
  new Elysia({ name: 'cpd/router' })
    .use(deps.auth)
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

/**
 * The composition root: builds every module's service from the context and mounts its routes on
 * one Elysia app. Tests import buildApp and drive it with app.handle(new Request(…)).
 */
import { openapi } from '@elysiajs/openapi';
import { Elysia } from 'elysia';
import { accountsRoutes, createAccountsService } from './modules/accounts';
import { agentAuthPlugin, agentsRoutes, createAgentsService } from './modules/agents';
import { createSiteService, siteRoutes } from './modules/site';
import { createPricingService, pricingRoutes } from './modules/pricing';
import { createReleasesService, releasesRoutes } from './modules/releases';
import type { AppContext } from './platform/context';
import { AppError } from './platform/errors';
import { authPlugin } from './platform/http/auth';
import { errorPlugin } from './platform/http/errors';
import { requestLogPlugin } from './platform/http/request-log';
import { VERSION } from './version';

export async function buildApp(ctx: AppContext) {
  const accounts = createAccountsService(ctx);
  const site = createSiteService(ctx);
  const auth = authPlugin(accounts.resolver);
  const pricing = createPricingService(ctx);
  await pricing.load();
  const releases = createReleasesService(ctx);
  site.addPage({ path: '/downloads', lastmod: () => releases.newestHeldPublication() });
  // Until the router module lands, agent turns fail with 503 instead of calling a model.
  const agents = createAgentsService(ctx, {
    models: {
      streamChat() {
        throw new AppError('unavailable', 'model router not available');
      },
    },
  });

  const app = new Elysia()
    .use(requestLogPlugin(ctx.log))
    .use(errorPlugin(ctx.log))
    .use(
      openapi({
        path: '/api/docs',
        specPath: '/api/docs/json',
        documentation: { info: { title: 'cpd', version: VERSION, description: 'Compute platform API' } },
      }),
    )
    .use(auth)
    .use(accountsRoutes({ accounts, auth, config: ctx.config }))
    .use(siteRoutes(site))
    .use(pricingRoutes({ auth, pricing }))
    .use(releasesRoutes(releases))
    .use(agentsRoutes({ agents, auth: agentAuthPlugin(ctx.config.agentCloudApiKey, accounts.resolver) }));

  const services = { accounts, site, pricing, releases, agents };
  return { app, services };
}

export type BuiltApp = Awaited<ReturnType<typeof buildApp>>;

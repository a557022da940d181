/**
 * The composition root: builds every module's service from the context and mounts its routes on
 * one Elysia app. Tests import buildApp and drive it with app.handle(new Request(…)).
 */
import { openapi } from '@elysiajs/openapi';
import { Elysia } from 'elysia';
import { accountEmailRoutes, accountsRoutes, createAccountsService, createIdentities, createOAuth, createPhoneCodes, oauthRoutes, phoneRoutes } from './modules/accounts';
import { adminRoutes, createAdminService } from './modules/admin';
import { createAuditService } from './modules/audit';
import { createOrgsService, orgsRoutes } from './modules/orgs';
import { agentAuthPlugin, agentPrincipal, agentsRoutes, createAgentsService } from './modules/agents';
import { createSiteService, siteRoutes } from './modules/site';
import { billingRoutes, createBillingService, PROVIDER_BODY_PATHS, redemptionRoutes } from './modules/billing';
import { createGatewayService, gatewayCostHeader, gatewayRoutes } from './modules/gateway';
import { capturesRoutes, createCapturesService } from './modules/captures';
import { createRouterService, requestSilenceSeconds, routerRoutes } from './modules/router';
import { createCostReport, createUsageLog, usageRoutes } from './modules/usage';
import { createPricingService, pricingPages, pricingRoutes } from './modules/pricing';
import { createDownloads, createRegistryService, registryPages, registryRoutes } from './modules/registry';
import { createReleasesService, releasesRoutes } from './modules/releases';
import { createSupervisor, runtimeRoutes } from './modules/runtime';
import { createWebhooksService, type WorkerOptions, webhooksRoutes } from './modules/webhooks';
import type { AppContext } from './app-context';
import { type AuthMode, authenticate, authPlugin, SESSION_COOKIE } from './platform/http/auth';
import { credentialGate } from './platform/http/credential-gate';
import { jsonBodiesOnly } from './platform/http/body-type';
import { htmlSecurityHeaders } from './platform/http/html';
import { foreignOriginGuard } from './platform/http/origin';
import { namedLimiter } from './platform/http/rate-limit';
import { openObjectStore } from './platform/storage';
import { errorPlugin } from './platform/http/errors';
import { httpMetricsPlugin, metricsRoutes } from './platform/http/metrics';
import { requestLogPlugin } from './platform/http/request-log';
import { toMajor } from './platform/money';
import { VERSION } from './version';
import { consoleRoutes } from './console';

const API_SPEC_PATH = '/api/docs/json';

export interface BuildOptions {
  /** The webhook delivery worker's timings; `manual`: not started (a test steps it with deliverDue). */
  webhooks?: WorkerOptions & { manual?: boolean };
}

export async function buildApp(ctx: AppContext, opts: BuildOptions = {}) {
  const accounts = createAccountsService(ctx);
  const audit = createAuditService(ctx);
  const site = createSiteService(ctx);
  const publicOrigin = new URL(ctx.config.publicUrl).origin;
  const auth = authPlugin(accounts.resolver, publicOrigin);
  const pricing = createPricingService(ctx);
  const store = openObjectStore(ctx.config, ctx.clock);
  const registry = createRegistryService(ctx, { store });
  const downloads = createDownloads(ctx, { registry, store, limiter: namedLimiter(ctx, 'download') });
  site.addPage({ path: '/', lastmod: () => registry.lastModified() });
  site.addPage({ path: '/models', lastmod: () => registry.lastModified() });
  site.addPages(() => registry.listModels().map((m) => ({ path: `/models/${m.slug}`, lastmod: () => registry.lastModified(m.slug) })));
  site.addPage({ path: '/pricing', lastmod: () => pricing.lastModified() });
  const releases = createReleasesService(ctx);
  site.addPage({ path: '/downloads', lastmod: () => releases.newestHeldPublication() });
  const webhooks = createWebhooksService(ctx, { onEndpointDisabled: (userId, url) => accounts.notifications.webhookDisabled(userId, url), ...opts.webhooks });
  if (!opts.webhooks?.manual) webhooks.startWorker();
  const billing = createBillingService(ctx, { events: webhooks.events });
  billing.startSweeper();
  const router = createRouterService(ctx, { pricing, billing, keyLimitsOf: accounts.keyLimitsOf, keyEvents: webhooks.events });
  const orgs = createOrgsService(ctx, { accounts, audit, balances: billing.getBalancesMicros, spentBy: router.keySpentBy });
  accounts.useOrgs(orgs.membership);
  // Each cache LISTENs, then reads; the LISTEN connection opens once for all. One after the other
  // (start-up time, docs/design/start-up.md): the reads take well under a millisecond each on the pool's
  // one open connection, while reads side by side made the pool open two more (~5 ms of
  // PostgreSQL's CPU apiece, on the cores the start-up needs).
  await router.ready();
  // Payment, refund and low-balance mails, and the balance.low webhook.
  await accounts.notifications.watch({
    balances: billing.getBalancesMicros,
    onBalanceChange: billing.onBalanceChange,
    onMoneyEvent: billing.onMoneyEvent,
    onLowBalance: (userId, { balanceMicros, thresholdMicros }) => webhooks.emitBalanceLow(userId, { balance: toMajor(balanceMicros), threshold: toMajor(thresholdMicros) }),
  });
  await pricing.load();
  await registry.load();
  const captures = createCapturesService(ctx, { store, keyCaptures: accounts.keyCaptures });
  await captures.ready();
  const gateway = createGatewayService(ctx, router, captures);
  // Gateway requests and streamed agent turns may stay silent this long (platform/http/listen's holdOpen).
  const silenceSeconds = requestSilenceSeconds(ctx.config.router);
  const admin = createAdminService(ctx, { accounts, billing, audit, priceGroups: pricing.groups });
  const agents = createAgentsService(ctx, { models: router });
  // Started by `cpd serve` when ENGINES is set; stopping it is a no-op when it never started.
  const runtime = createSupervisor(ctx, { registry, router });
  ctx.onShutdown(() => runtime.stop());

  // normalize 'typebox': unknown body fields are dropped, then the body is validated as sent. Elysia's
  // default (exactMirror) copies a value into the schema's shape before validating, so a string
  // where an object or array belongs became {"0": "s", …} and passed (metadata: "x", a body "x").
  // A schema that keeps unknown fields says `additionalProperties: t.Unknown()` (`true` is dropped).
  const agentAuth = {
    cloudKey: ctx.config.agentCloudApiKey,
    resolver: accounts.resolver,
    anonymousLimiter: namedLimiter(ctx, 'agents_anonymous'),
    trustProxy: ctx.config.trustProxy,
  };
  // Every route's credentials are checked before its body is read (no credential: 401 whatever
  // the body, before it arrives). Told the routes once the app is built.
  const gate = credentialGate((request, server, modes) =>
    modes.includes('agent') ? agentPrincipal(request, server, agentAuth) : authenticate(accounts.resolver, publicOrigin, request, modes as AuthMode[]),
  );
  const app = new Elysia({ normalize: 'typebox' })
    .use(requestLogPlugin(ctx.log))
    .use(httpMetricsPlugin(ctx.metrics))
    // Before the error plugin: its 415 answer replaces the parse or validation error of a refused body.
    .use(jsonBodiesOnly(PROVIDER_BODY_PATHS))
    .use(errorPlugin(ctx.log))
    .use(gatewayCostHeader())
    .use(foreignOriginGuard(publicOrigin))
    .use(gate.plugin)
    .use(htmlSecurityHeaders(ctx.config.publicUrl))
    .use(
      openapi({
        // The UI at /api/docs is the console's (embedded Swagger UI); the plugin only serves the spec.
        path: '/api/docs',
        specPath: API_SPEC_PATH,
        provider: null,
        // /api/usage/export.csv is an API route, not a static file.
        exclude: { staticFile: false },
        documentation: {
          info: { title: 'cpd', version: VERSION, description: 'Compute platform API' },
          // Swagger UI's Authorize button: an API key or session token as a bearer, or the console's session cookie.
          components: {
            securitySchemes: {
              bearer: { type: 'http', scheme: 'bearer', description: 'an API key (bfvk-…) or the token of POST /api/auth/login' },
              session: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE, description: "the console's session cookie" },
            },
          },
        },
      }),
    )
    .use(auth)
    .use(metricsRoutes({ registry: ctx.metrics, token: ctx.config.metricsToken }))
    .use(accountsRoutes({ accounts, auth, config: ctx.config, keyPolicy: { isModel: router.isModel, spentBy: router.keySpentBy } }))
    .use(accountEmailRoutes({ accounts, auth, config: ctx.config }))
    .use(phoneRoutes({ phoneCodes: createPhoneCodes(ctx, accounts), config: ctx.config }))
    .use(
      oauthRoutes({ accounts, oauth: createOAuth(ctx), identities: createIdentities(ctx), auth, config: ctx.config, startLimiter: namedLimiter(ctx, 'oauth_start') }),
    )
    .use(siteRoutes(site))
    .use(pricingRoutes({ auth, pricing, audit }))
    .use(pricingPages({ pricing, config: ctx.config }))
    .use(registryRoutes({ auth, resolver: accounts.resolver, log: ctx.log, registry, downloads, store, audit }))
    .use(registryPages({ registry, config: ctx.config }))
    .use(releasesRoutes(releases, ctx.config.site))
    .use(billingRoutes({ auth, billing, config: ctx.config, requirePayer: accounts.requireVerifiedEmail, walletOf: orgs.walletOf }))
    .use(redemptionRoutes({ auth, redemption: billing.redemption, audit }))
    .use(webhooksRoutes({ auth, webhooks }))
    .use(gatewayRoutes({ auth, gateway, silenceSeconds }))
    .use(usageRoutes({ auth, cost: createCostReport(ctx, { emailsOf: accounts.emailsOf, keyCreatorsOf: accounts.keyCreatorsOf }), usage: createUsageLog(ctx), walletOf: orgs.walletOf }))
    .use(routerRoutes({ auth, router, audit }))
    .use(capturesRoutes({ auth, captures, audit }))
    .use(adminRoutes({ auth, admin }))
    .use(runtimeRoutes({ auth, supervisor: runtime }))
    .use(consoleRoutes({ config: ctx.config, resolver: accounts.resolver, specPath: API_SPEC_PATH }))
    .use(
      agentsRoutes({
        agents,
        auth: agentAuthPlugin(agentAuth),
        silenceSeconds,
      }),
    );

  // Outside the chain: one more plugin in it took the app's type past what TypeScript instantiates (TS2589).
  app.use(orgsRoutes({ auth, orgs }));
  gate.protect(app.routes);
  const services = { accounts, admin, audit, orgs, site, pricing, registry, store, releases, agents, billing, router, gateway, runtime, captures, webhooks };
  return { app, services };
}

export type BuiltApp = Awaited<ReturnType<typeof buildApp>>;

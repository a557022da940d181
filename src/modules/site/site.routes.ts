import { Elysia, t } from 'elysia';
import { embeddedChangelog } from './changelog';
import type { SiteService } from './site.service';

export const siteRoutes = (site: SiteService) =>
  new Elysia({ name: 'cpd/site' })
    .get('/healthz', () => site.health(), {
      detail: { summary: 'Database reachability', tags: ['site'] },
      response: { 200: t.Object({ status: t.Literal('ok') }) },
    })
    .get('/api/site', () => site.siteInfo(), { detail: { summary: 'Site metadata', tags: ['site'] } })
    .get('/api/changelog', () => ({ entries: embeddedChangelog }), { detail: { summary: 'Changelog', tags: ['site'] } })
    .get(
      '/sitemap.xml',
      async () => new Response(await site.sitemapXml(), { headers: { 'content-type': 'application/xml; charset=utf-8' } }),
      { detail: { summary: 'Sitemap 0.9', tags: ['site'] } },
    );

export { createSiteService, escapeXml, type SiteService, type SitemapPage } from './site.service';
export { siteRoutes } from './site.routes';

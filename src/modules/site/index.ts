export { createSiteService, type SiteService, type SitemapPage } from './site.service';
export { siteRoutes } from './site.routes';
export { renderPage } from './layout';

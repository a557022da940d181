export { createSiteService, type SiteService, type SitemapPage } from './site.service';
export { siteRoutes } from './site.routes';
export { escapeHtml, html, renderPage, type SafeHtml } from './layout';

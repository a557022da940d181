export { createSiteService, type SiteService, type SitemapPage } from './site.service';
export { siteRoutes } from './site.routes';
export { PAGE_STYLE, renderPage } from './layout';
export { publicText, type PublicText } from './public-text';

import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { escapeHtml } from '../../platform/http/html';

/** Public pages that exist and belong in the sitemap; modules add theirs with `addPage`. */
export interface SitemapPage {
  path: string;
  lastmod?: () => Promise<Date | null> | Date | null;
}

export function createSiteService(ctx: AppContext) {
  const pages: SitemapPage[] = [];
  /** Page lists that change at run time (one page per model). */
  const sources: Array<() => SitemapPage[]> = [];

  return {
    siteInfo() {
      const { site, currency, publicUrl, paymentMode, agentCloudApiKey, accounts } = ctx.config;
      const { oauth } = accounts;
      return {
        site,
        currency,
        name: site === 'intl' ? 'cpd International' : 'cpd China',
        public_url: publicUrl,
        features: {
          invoices: site === 'cn',
          receipts: site === 'intl',
          // What a visitor can do for free here: top up without paying, run agent turns unbilled.
          sandbox_payments: paymentMode === 'sandbox',
          open_agents: agentCloudApiKey === null,
          // How a visitor can sign up and in here (the console draws its buttons from these).
          email: accounts.mail !== null,
          email_verification: accounts.emailVerification,
          oauth: (['github', 'google', 'oidc'] as const).filter((id) => oauth[id] !== null),
          // The label of the generic OpenID provider's button (OIDC_NAME).
          oidc_name: oauth.oidc?.name ?? null,
          phone_login: accounts.sms !== null,
        },
      };
    },

    async health() {
      if (!(await ctx.database.ping(1000))) throw new AppError('unavailable', 'database unavailable');
      return { status: 'ok' as const };
    },

    addPage(page: SitemapPage) {
      pages.push(page);
    },

    addPages(source: () => SitemapPage[]) {
      sources.push(source);
    },

    async sitemapXml(): Promise<string> {
      const base = ctx.config.publicUrl;
      const urls = await Promise.all(
        [...pages, ...sources.flatMap((source) => source())].map(async (p) => {
          const lastmod = p.lastmod ? await p.lastmod() : null;
          return `  <url>\n    <loc>${escapeHtml(base + p.path)}</loc>${lastmod ? `\n    <lastmod>${lastmod.toISOString()}</lastmod>` : ''}\n  </url>`;
        }),
      );
      return `<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n${urls.join('\n')}${urls.length ? '\n' : ''}</urlset>\n`;
    },
  };
}

export type SiteService = ReturnType<typeof createSiteService>;

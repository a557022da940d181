/** The public /pricing page: the same catalog as GET /api/pricing, as a table. */
import { Elysia } from 'elysia';
import type { Config } from '../../config';
import { html } from '../../platform/http/html';
import { publicText, renderPage } from '../site';
import type { PricingService } from './pricing.service';

export const pricingPages = (deps: { pricing: PricingService; config: Config }) =>
  new Elysia({ name: 'cpd/pricing-pages' }).get(
    '/pricing',
    ({ request }) => {
      const { models, gpus } = deps.pricing.catalog();
      const { language, text } = publicText(deps.config.site, request);
      const { currency } = deps.config;
      const p = text.pricing;
      const money = (v: number) => text.money(v, currency);
      return renderPage({
        language,
        text,
        title: p.title,
        body: html`<h1>${p.title}</h1>
<p>${p.intro(text.currencyName(currency))}</p>
<h2>${p.models}</h2>
${models.length ? html`<table><thead><tr>${p.head.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${models.map((m) => html`<tr><td>${m.slug}</td><td>${money(m.price)} ${p.units[m.unit] ?? m.unit}</td></tr>`)}</tbody></table>` : html`<p>${p.noModels}</p>`}
<h2>${p.gpus}</h2>
${gpus.length ? html`<table><thead><tr>${p.gpuHead.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${gpus.map((g) => html`<tr><td>${g.name}</td><td>${money(g.hourly_price)}</td></tr>`)}</tbody></table>` : html`<p>${p.noGpus}</p>`}`,
      });
    },
    { detail: { hide: true } },
  );

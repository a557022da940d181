/** The public /pricing page: the same catalog as GET /api/pricing, as a table. */
import { Elysia } from 'elysia';
import type { Config } from '../../config';
import { html } from '../../platform/http/html';
import { publicText, renderPage } from '../site';
import type { PricingService } from './pricing.service';

type CatalogModel = ReturnType<PricingService['catalog']>['models'][number];
type PricingText = ReturnType<typeof publicText>['text']['pricing'];

/** The price, or, when any token price is set, what input, output and cached input cost (absent ones resolved as the gateway does). */
function priceCell(m: CatalogModel, money: (v: number) => string, p: PricingText) {
  const unit = p.units[m.unit] ?? m.unit;
  if (m.input_price === undefined && m.output_price === undefined && m.cached_input_price === undefined) return html`${money(m.price)} ${unit}`;
  const input = m.input_price ?? m.price;
  const kinds = p.tokenKinds;
  return html`${kinds.input} ${money(input)}<br>${kinds.output} ${money(m.output_price ?? m.price)}<br>${kinds.cached} ${money(m.cached_input_price ?? input)}<br>${unit}`;
}

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
${models.length ? html`<table><thead><tr>${p.head.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${models.map((m) => html`<tr><td>${m.slug}</td><td>${priceCell(m, money, p)}</td></tr>`)}</tbody></table>` : html`<p>${p.noModels}</p>`}
<h2>${p.gpus}</h2>
${gpus.length ? html`<table><thead><tr>${p.gpuHead.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${gpus.map((g) => html`<tr><td>${g.name}</td><td>${money(g.hourly_price)}</td></tr>`)}</tbody></table>` : html`<p>${p.noGpus}</p>`}`,
      });
    },
    { detail: { hide: true } },
  );

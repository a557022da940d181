/** The public /pricing page: the same catalog as GET /api/pricing, as a table. */
import { Elysia } from 'elysia';
import type { Config } from '../../config';
import { html } from '../../platform/http/html';
import { renderPage } from '../site';
import type { PricingService } from './pricing.service';

const UNIT_LABEL: Record<string, string> = { per_million_tokens: 'per million tokens', per_request: 'per request' };

type CatalogModel = ReturnType<PricingService['catalog']>['models'][number];

/** The price, or, when any token price is set, what input, output and cached input cost (absent ones resolved as the gateway does). */
function priceCell(m: CatalogModel, money: (v: number) => string) {
  if (m.input_price === undefined && m.output_price === undefined && m.cached_input_price === undefined) return html`${money(m.price)} ${UNIT_LABEL[m.unit]}`;
  const input = m.input_price ?? m.price;
  return html`input ${money(input)}<br>output ${money(m.output_price ?? m.price)}<br>cached input ${money(m.cached_input_price ?? input)}<br>${UNIT_LABEL[m.unit]}`;
}

export const pricingPages = (deps: { pricing: PricingService; config: Config }) =>
  new Elysia({ name: 'cpd/pricing-pages' }).get(
    '/pricing',
    () => {
      const { models, gpus } = deps.pricing.catalog();
      const money = (v: number) => `${v.toLocaleString('en-US', { maximumFractionDigits: 6 })} ${deps.config.currency}`;
      return renderPage({
        title: 'Pricing',
        body: html`<h1>Pricing</h1>
<p>Prices in ${deps.config.currency}, charged from the prepaid wallet.</p>
<h2>Models</h2>
${models.length ? html`<table><thead><tr><th>Model</th><th>Price</th></tr></thead><tbody>${models.map((m) => html`<tr><td>${m.slug}</td><td>${priceCell(m, money)}</td></tr>`)}</tbody></table>` : html`<p>No model prices are set.</p>`}
<h2>GPUs</h2>
${gpus.length ? html`<table><thead><tr><th>GPU</th><th>Per hour</th></tr></thead><tbody>${gpus.map((g) => html`<tr><td>${g.name}</td><td>${money(g.hourly_price)}</td></tr>`)}</tbody></table>` : html`<p>No GPU prices are set.</p>`}`,
      });
    },
    { detail: { hide: true } },
  );

/** Public HTML pages of the registry: the home page, the model list and one page per model. */
import { Elysia } from 'elysia';
import type { Config } from '../../config';
import { html } from '../../platform/http/html';
import { publicText, renderPage } from '../site';
import type { RegistryService } from './registry.service';

export function formatBytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

export const registryPages = (deps: { registry: RegistryService; config: Config }) => {
  const { registry, config } = deps;
  return new Elysia({ name: 'cpd/registry-pages' })
    .get(
      '/',
      ({ request }) => {
        const { language, text } = publicText(config.site, request);
        const siteName = text.siteName[config.site];
        const currency = text.currencyName(config.currency);
        return renderPage({
          language,
          text,
          title: siteName,
          body: html`<h1>${siteName}</h1>
<p>${text.home.intro(currency)}</p>
<ul>
<li><a href="/models">${text.nav.models}</a>${text.home.models(registry.listModels().length)}</li>
<li><a href="/pricing">${text.nav.pricing}</a>${text.home.pricing(currency)}</li>
<li><a href="/downloads">${text.nav.downloads}</a>${text.home.downloads}</li>
<li><a href="/api/docs">${text.home.apiReference}</a></li>
</ul>`,
        });
      },
      { detail: { hide: true } },
    )
    .get(
      '/models',
      ({ request }) => {
        const { language, text } = publicText(config.site, request);
        const rows = registry
          .listModels()
          .map(
            (m) =>
              html`<tr><td><a href="/models/${m.slug}">${m.name}</a></td><td>${m.family}</td><td>${m.quants.join(', ')}</td><td>${m.sdk}</td><td>${formatBytes(m.size_bytes)}</td></tr>`,
          );
        return renderPage({
          language,
          text,
          title: `${text.models.title} · ${text.siteName[config.site]}`,
          body: html`<h1>${text.models.title}</h1>
${rows.length ? html`<table><thead><tr>${text.models.head.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${rows}</tbody></table>` : html`<p>${text.models.none}</p>`}`,
        });
      },
      { detail: { hide: true } },
    )
    .get(
      '/models/:slug',
      ({ params, request }) => {
        const { language, text } = publicText(config.site, request);
        const t = text.models;
        const model = registry.listModels().find((m) => m.slug === params.slug);
        if (!model)
          return renderPage({ language, text, title: t.notFoundTitle, status: 404, body: html`<h1>${t.notFound}</h1><p><a href="/models">${t.all}</a></p>` });
        const artifacts = registry
          .artifactsOf(model.slug)
          .map(
            (a) =>
              html`<tr><td>${a.quant}</td><td>${a.sdk}</td><td>${a.kind === 'directory' ? t.zip : t.file}</td><td>${formatBytes(a.sizeBytes)}</td><td><code>${a.contentHash.slice(0, 12)}</code></td></tr>`,
          );
        const example = `curl -LOJ -H "Authorization: Bearer $CPD_API_KEY" "${config.publicUrl}/api/models/${model.slug}/download?quant=${model.quants[0]}&sdk=${model.sdk}"`;
        return renderPage({
          language,
          text,
          title: `${model.name} · ${text.siteName[config.site]}`,
          body: html`<h1>${model.name}</h1>
<p>${model.description}</p>
<p>${t.family}: ${model.family || '—'} · ${t.slug} <code>${model.slug}</code> · ${t.latestSdk} ${model.sdk}</p>
<table><thead><tr>${t.artifactHead.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${artifacts}</tbody></table>
<h2>${t.download}</h2>
<pre><code>${example}</code></pre>`,
        });
      },
      { detail: { hide: true } },
    );
};

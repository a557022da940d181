/** Public HTML pages of the registry: the home page, the model list and one page per model. */
import { Elysia } from 'elysia';
import type { Config } from '../../config';
import { html } from '../../platform/http/html';
import { renderPage } from '../site';
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
  const siteName = config.site === 'intl' ? 'cpd International' : 'cpd China';
  return new Elysia({ name: 'cpd/registry-pages' })
    .get(
      '/',
      () =>
        renderPage({
          title: siteName,
          body: html`<h1>${siteName}</h1>
<p>Quantized model bundles to download, an OpenAI-compatible inference gateway billed from a prepaid
wallet in ${config.currency}, and the latest engine, router, agent and memo releases.</p>
<ul>
<li><a href="/models">Models</a>: ${registry.listModels().length} bundles, downloadable with an API key.</li>
<li><a href="/pricing">Pricing</a>: per model and per GPU, in ${config.currency}.</li>
<li><a href="/downloads">Downloads</a>: the newest runtime releases.</li>
<li><a href="/api/docs">API reference</a></li>
</ul>`,
        }),
      { detail: { hide: true } },
    )
    .get(
      '/models',
      () => {
        const rows = registry
          .listModels()
          .map(
            (m) =>
              html`<tr><td><a href="/models/${m.slug}">${m.name}</a></td><td>${m.family}</td><td>${m.quants.join(', ')}</td><td>${m.sdk}</td><td>${formatBytes(m.size_bytes)}</td></tr>`,
          );
        return renderPage({
          title: `Models · ${siteName}`,
          body: html`<h1>Models</h1>
${rows.length ? html`<table><thead><tr><th>Model</th><th>Family</th><th>Quantizations</th><th>SDK</th><th>Size</th></tr></thead><tbody>${rows}</tbody></table>` : html`<p>No models are published yet.</p>`}`,
        });
      },
      { detail: { hide: true } },
    )
    .get(
      '/models/:slug',
      ({ params }) => {
        const model = registry.listModels().find((m) => m.slug === params.slug);
        if (!model) return renderPage({ title: 'Not found', status: 404, body: html`<h1>Model not found</h1><p><a href="/models">All models</a></p>` });
        const artifacts = registry
          .artifactsOf(model.slug)
          .map(
            (a) =>
              html`<tr><td>${a.quant}</td><td>${a.sdk}</td><td>${a.kind === 'directory' ? 'ZIP bundle' : 'file'}</td><td>${formatBytes(a.sizeBytes)}</td><td><code>${a.contentHash.slice(0, 12)}</code></td></tr>`,
          );
        const example = `curl -LOJ -H "Authorization: Bearer $CPD_API_KEY" "${config.publicUrl}/api/models/${model.slug}/download?quant=${model.quants[0]}&sdk=${model.sdk}"`;
        return renderPage({
          title: `${model.name} · ${siteName}`,
          body: html`<h1>${model.name}</h1>
<p>${model.description}</p>
<p>Family: ${model.family || '—'} · slug <code>${model.slug}</code> · latest SDK ${model.sdk}</p>
<table><thead><tr><th>Quantization</th><th>SDK</th><th>Form</th><th>Size</th><th>SHA-256</th></tr></thead><tbody>${artifacts}</tbody></table>
<h2>Download</h2>
<pre><code>${example}</code></pre>`,
        });
      },
      { detail: { hide: true } },
    );
};

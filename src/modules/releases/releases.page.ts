/** The body of the public /downloads page: the four latest releases, or why one is missing. */
import { html, type SafeHtml } from '../../platform/http/html';
import type { ComponentOverview } from './releases.service';

const TITLES: Record<ComponentOverview['component'], string> = {
  engine: 'Engine',
  router: 'Router',
  agent: 'Agent',
  memo: 'Memo',
};

function formatSize(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${bytes} B`;
}

function componentSection({ component, release, error }: ComponentOverview): SafeHtml {
  const title = TITLES[component];
  if (!release)
    return html`<section id="${component}"><h2>${title}</h2><p class="unavailable">Release information is unavailable right now (${error}). Please try again later.</p></section>`;
  const rows = release.assets.map(
    (a) =>
      html`<tr><td><a href="${a.url}">${a.name}</a></td><td>${formatSize(a.size)}</td><td>${a.digest ? html`<code>${a.digest}</code>` : ''}</td></tr>`,
  );
  return html`<section id="${component}">
<h2>${title} <code>${release.tag_name}</code>${release.prerelease ? ' (pre-release)' : ''}</h2>
<p>${release.name} · published <time datetime="${release.published_at}">${release.published_at.slice(0, 10)}</time> · JSON: <a href="/api/download/${component}-latest"><code>/api/download/${component}-latest</code></a></p>
${rows.length ? html`<table><thead><tr><th>File</th><th>Size</th><th>Digest</th></tr></thead><tbody>${rows}</tbody></table>` : html`<p>No files for this component in the release.</p>`}
</section>`;
}

export function downloadsBody(overview: ComponentOverview[]): SafeHtml {
  return html`<h1>Downloads</h1>
<p>The latest release of each component. Engine and router archives come with their FFI library for every platform.</p>
${overview.map(componentSection)}`;
}

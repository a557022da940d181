/** The body of the public /downloads page: the four latest releases, or why one is missing. */
import { html, type SafeHtml } from '../../platform/http/html';
import type { PublicText } from '../site';
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

function componentSection({ component, release, error }: ComponentOverview, d: PublicText['downloads']): SafeHtml {
  const title = TITLES[component];
  if (!release)
    return html`<section id="${component}"><h2>${title}</h2><p class="unavailable">${d.unavailable(String(error))}</p></section>`;
  const rows = release.assets.map(
    (a) =>
      html`<tr><td><a href="${a.url}">${a.name}</a></td><td>${formatSize(a.size)}</td><td>${a.digest ? html`<code>${a.digest}</code>` : ''}</td></tr>`,
  );
  return html`<section id="${component}">
<h2>${title} <code>${release.tag_name}</code>${release.prerelease ? d.prerelease : ''}</h2>
<p>${release.name} · ${d.published} <time datetime="${release.published_at}">${release.published_at.slice(0, 10)}</time> · JSON: <a href="/api/download/${component}-latest"><code>/api/download/${component}-latest</code></a></p>
${rows.length ? html`<table><thead><tr>${d.head.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${rows}</tbody></table>` : html`<p>${d.noFiles}</p>`}
</section>`;
}

export function downloadsBody(overview: ComponentOverview[], text: PublicText): SafeHtml {
  const d = text.downloads;
  return html`<h1>${d.title}</h1>
<p>${d.intro}</p>
${overview.map((o) => componentSection(o, d))}`;
}

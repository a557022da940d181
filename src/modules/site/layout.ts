/**
 * The shared shell of the public HTML pages (/, /models, /pricing, /downloads): one small
 * stylesheet and a nav. Pages pass already-escaped body HTML built with the HTML kit's `html`.
 */
import { html, SafeHtml } from '../../platform/http/html';
import type { Language } from '../../platform/http/language';
import type { PublicText } from './public-text';

/** The public pages' stylesheet; also the sandbox checkout's, which stands beside them. */
export const PAGE_STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:0 1rem;color:#222}
header{display:flex;gap:1.25rem;align-items:baseline;border-bottom:1px solid #ddd;padding:.75rem 0;margin-bottom:1rem}
header a{color:#225;text-decoration:none}header a:first-child{font-weight:700}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #eee}
code{background:#f4f4f4;padding:0 .25rem}footer{margin:2rem 0 1rem;color:#777;font-size:.85rem}`;

/** A complete page as a text/html Response in `language`, with the nav and the ways in (Log in, Sign up). */
export function renderPage({ title, body, status = 200, language, text }: { title: string; body: SafeHtml; status?: number; language: Language; text: PublicText }): Response {
  const links: Array<[string, string]> = [
    ['/', 'cpd'],
    ['/models', text.nav.models],
    ['/pricing', text.nav.pricing],
    ['/downloads', text.nav.downloads],
    ['/login', text.nav.login],
    ['/signup', text.nav.signup],
  ];
  const nav = links.map(([href, label]) => html`<a href="${href}">${label}</a>`);
  const page = html`<!doctype html>
<html lang="${language}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>${new SafeHtml(PAGE_STYLE)}</style>
</head>
<body>
<header>${nav}</header>
<main>
${body}
</main>
<footer>cpd</footer>
</body>
</html>
`;
  return new Response(page.value, { status, headers: { 'content-type': 'text/html; charset=utf-8', vary: 'accept-language, cookie' } });
}

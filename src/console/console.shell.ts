/**
 * The one HTML document behind /login, /signup and /console/*: it names the hashed bundle and
 * carries what the client needs before its first request (language, site, currency). The pages
 * themselves are drawn in the browser from the JSON API.
 */
import type { Config } from '../config';
import { escapeHtml } from '../platform/http/html';
import type { Language } from '../platform/http/language';
import { apiDocsEntry, assetUrl, consoleEntry } from './console.assets';

export { chooseLanguage, LANGUAGE_COOKIE, type Language } from '../platform/http/language';

/** Security headers of every console document: only this origin's scripts, styles and images; no framing. */
export const HTML_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
  vary: 'accept-language, cookie',
};

/** What the document says before its script runs, in its language. */
const SHELL_TEXT: Record<Language, { title: string; noscript: string }> = {
  en: { title: 'cpd console', noscript: 'This console needs JavaScript. Everything it does is also in the JSON API at /api/docs.' },
  'zh-CN': { title: 'cpd 控制台', noscript: '此控制台需要启用 JavaScript。它的全部功能也可通过 JSON API 使用，见 /api/docs。' },
};

export function consoleDocument(opts: { language: Language; site: Config['site']; currency: string }): string {
  const text = SHELL_TEXT[opts.language];
  return `<!doctype html>
<html lang="${opts.language}" data-site="${escapeHtml(opts.site)}" data-currency="${escapeHtml(opts.currency)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${text.title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${assetUrl(consoleEntry.css)}">
<script type="module" src="${assetUrl(consoleEntry.js)}"></script>
</head>
<body><div id="app"></div><noscript>${text.noscript}</noscript></body>
</html>
`;
}

/** The OpenAPI UI: Swagger UI from this binary, reading the spec from its absolute path. */
export function apiDocsDocument(specPath: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cpd API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${assetUrl(apiDocsEntry.uiCss)}">
<script src="${assetUrl(apiDocsEntry.uiJs)}" defer></script>
<script type="module" src="${assetUrl(apiDocsEntry.js!)}"></script>
</head>
<body><div id="swagger-ui" data-spec-url="${escapeHtml(specPath)}"></div></body>
</html>
`;
}

/**
 * The HTML kit: escaping, the `html` template, and the security headers every HTML page gets.
 * Pages (site, registry, pricing, releases), billing documents and the sandbox checkout build
 * their markup with `html`/`escapeHtml`; htmlSecurityHeaders adds the headers to whatever answers
 * text/html, so a new page cannot forget them.
 */
import { Elysia } from 'elysia';

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** Raw HTML that `html` inserts as is (the result of a nested `html` call). */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString() {
    return this.value;
  }
}

/**
 * Tagged template that escapes every interpolated value unless it is SafeHtml; arrays are joined.
 * Example: html`<li>${model.name}</li>` escapes the name.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0]!;
  values.forEach((v, i) => {
    const parts = Array.isArray(v) ? v : [v];
    out += parts.map((p) => (p instanceof SafeHtml ? p.value : p === null || p === undefined ? '' : escapeHtml(p))).join('');
    out += strings[i + 1]!;
  });
  return new SafeHtml(out);
}

/**
 * Everything a page loads comes from this origin (styles may be inline: the pages carry one small
 * <style>); no page may be framed (clickjacking), no form may post elsewhere.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "img-src 'self' data:",
  "style-src 'self' 'unsafe-inline'",
  "script-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The headers of an HTML page; HSTS only when the site is served over https (PUBLIC_URL). */
export function htmlHeaders(publicUrl: string): Record<string, string> {
  return {
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'strict-origin-when-cross-origin',
    ...(publicUrl.startsWith('https:') ? { 'strict-transport-security': 'max-age=31536000' } : {}),
  };
}

/** Adds htmlHeaders to every text/html response of the app, whichever module answered it; a header the page set itself (the console's own policy) is kept. */
export const htmlSecurityHeaders = (publicUrl: string) => {
  const headers = Object.entries(htmlHeaders(publicUrl));
  return new Elysia({ name: 'cpd/html-headers' }).mapResponse({ as: 'global' }, ({ response, set }) => {
    if (response instanceof Response) {
      if (!response.headers.get('content-type')?.startsWith('text/html')) return;
      for (const [k, v] of headers) if (!response.headers.has(k)) response.headers.set(k, v);
      return response;
    }
    const type = set.headers['content-type'];
    if (typeof type === 'string' && type.startsWith('text/html')) for (const [k, v] of headers) set.headers[k] ??= v;
  });
};

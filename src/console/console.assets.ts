/**
 * The browser files embedded in the binary (console bundle and the OpenAPI UI), served from this
 * origin under /assets/<name>-<content hash>.<ext>. A name changes whenever its content does, so
 * each answer may be cached for a year; nothing is ever fetched from another host.
 */
import { entries, files } from './bundle.generated';

export const ASSET_PREFIX = '/assets/';
const TYPES: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };
const gzipped = new Map<string, Uint8Array>();

export const assetUrl = (name: string) => ASSET_PREFIX + name;
export const consoleEntry = entries.console;
export const apiDocsEntry = entries.apiDocs;

/** The asset as a Response (gzip when the client takes it, compressed once and kept), or null for an unknown name. */
export function assetResponse(name: string, acceptEncoding: string | null): Response | null {
  const text = Object.hasOwn(files, name) ? files[name]! : null;
  if (text === null) return null;
  const headers: Record<string, string> = {
    'content-type': TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream',
    'cache-control': 'public, max-age=31536000, immutable',
    'x-content-type-options': 'nosniff',
    vary: 'accept-encoding',
  };
  if (!/\bgzip\b/.test(acceptEncoding ?? '')) return new Response(text, { headers });
  let body = gzipped.get(name);
  if (!body) {
    body = Bun.gzipSync(new TextEncoder().encode(text), { level: 9 });
    gzipped.set(name, body);
  }
  return new Response(body, { headers: { ...headers, 'content-encoding': 'gzip' } });
}

/**
 * Local stand-ins for GitHub's REST releases API and for the China release mirror, on 127.0.0.1
 * port 0. Both answer conditional requests (ETag / If-None-Match → 304) like the real ones, serve
 * asset bytes from their own URLs, record every request, and take an `override` hook that lets a
 * test inject a fault (non-JSON, 403, a hang…) for any request.
 *
 *   const gh = startFakeGitHub({
 *     releases: { 'ariacompute/engine': { latest: { tag_name: 'v1.0.0', assets: [{ name: 'aria-engine_1.0.0_linux_x86_64.tar.gz' }] } } },
 *     assets: { '/ariacompute/engine/releases/download/v1.0.0/aria-engine_1.0.0_linux_x86_64.tar.gz': tarBytes },
 *   });
 *   // GITHUB_API_URL = gh.url; the asset's browser_download_url points back at gh.url
 *
 * An asset without `browser_download_url` gets GitHub's pattern `/{owner}/{repo}/releases/download/{tag}/{name}`;
 * a relative URL is resolved against the fake; `size` and `digest` default to those of the bytes
 * served at that URL.
 */
import { createHash } from 'node:crypto';

export interface FakeAsset {
  name: string;
  browser_download_url?: string;
  size?: number;
  content_type?: string;
  /** null to publish no digest (as GitHub does for older assets). */
  digest?: string | null;
}

export interface FakeRelease {
  tag_name: string;
  name?: string | null;
  prerelease?: boolean;
  published_at?: string;
  assets?: FakeAsset[];
}

export interface FakeRepo {
  /** null: the repository has no published release (GitHub answers 404). */
  latest: FakeRelease | null;
  byTag?: Record<string, FakeRelease>;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
}

export interface FakeServer {
  url: string;
  requests: RecordedRequest[];
  /** Return a Response to answer a request yourself (faults); undefined to fall through. */
  override: ((req: Request, path: string) => Response | Promise<Response> | undefined) | null;
  /** Never answers until the server stops (for timeout tests): `fake.override = () => fake.hang()`. */
  hang(): Promise<Response>;
  stop(): Promise<void>;
}

export interface FakeGitHub extends FakeServer {
  releases: Record<string, FakeRepo>;
  assets: Record<string, Uint8Array | string>;
}

function bytesOf(data: Uint8Array | string): Uint8Array {
  return typeof data === 'string' ? new TextEncoder().encode(data) : data;
}

function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('hex').slice(0, 40)}"`;
}

function json(value: unknown, req: Request, extra: Record<string, string> = {}): Response {
  const body = JSON.stringify(value);
  const etag = etagOf(body);
  const headers = { etag, 'content-type': 'application/json; charset=utf-8', ...extra };
  if (req.headers.get('if-none-match') === etag) return new Response(null, { status: 304, headers });
  return new Response(body, { headers });
}

function startServer(route: (req: Request, path: string, origin: string) => Response | Promise<Response>): FakeServer {
  let release!: () => void;
  const stopped = new Promise<void>((r) => (release = r));
  const fake: FakeServer = {
    url: '',
    requests: [],
    override: null,
    hang: () => stopped.then(() => new Response(null, { status: 503 })),
    async stop() {
      release();
      await server.stop(true);
    },
  };
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = decodeURIComponent(new URL(req.url).pathname);
      fake.requests.push({ method: req.method, path, headers: Object.fromEntries(req.headers) });
      return (await fake.override?.(req, path)) ?? route(req, path, fake.url);
    },
  });
  fake.url = `http://127.0.0.1:${server.port}`;
  return fake;
}

const notFound = () => Response.json({ message: 'Not Found', documentation_url: 'https://docs.github.com/rest' }, { status: 404 });

function serveAsset(assets: Record<string, Uint8Array | string>, path: string): Response | undefined {
  const data = assets[path];
  if (data === undefined) return undefined;
  return new Response(bytesOf(data), { headers: { 'content-type': 'application/octet-stream' } });
}

/** A GitHub REST API subset: GET /repos/{owner}/{repo}/releases/latest and /releases/tags/{tag}, plus asset downloads. */
export function startFakeGitHub(init: { releases: Record<string, FakeRepo>; assets?: Record<string, Uint8Array | string> }): FakeGitHub {
  function githubRelease(repo: string, r: FakeRelease, origin: string, index: number) {
    return {
      url: `${origin}/repos/${repo}/releases/${index}`,
      id: index,
      tag_name: r.tag_name,
      name: r.name === undefined ? r.tag_name : r.name,
      draft: false,
      prerelease: r.prerelease ?? false,
      created_at: r.published_at ?? '2026-01-01T00:00:00Z',
      published_at: r.published_at ?? '2026-01-01T00:00:00Z',
      assets: (r.assets ?? []).map((a, i) => {
        const url = a.browser_download_url ?? `/${repo}/releases/download/${r.tag_name}/${a.name}`;
        const absolute = url.startsWith('/') ? origin + url : url;
        const bytes = url.startsWith('/') && gh.assets[url] !== undefined ? bytesOf(gh.assets[url]!) : undefined;
        const digest = a.digest !== undefined ? a.digest : bytes ? `sha256:${createHash('sha256').update(bytes).digest('hex')}` : null;
        return {
          id: index * 1000 + i,
          name: a.name,
          label: '',
          state: 'uploaded',
          content_type: a.content_type ?? 'application/gzip',
          size: a.size ?? bytes?.length ?? 1024,
          digest,
          download_count: 0,
          browser_download_url: absolute,
        };
      }),
    };
  }

  const gh: FakeGitHub = Object.assign(
    startServer((req, path, origin) => {
      const asset = serveAsset(gh.assets, path);
      if (asset) return asset;
      const m = /^\/repos\/([^/]+\/[^/]+)\/releases\/(latest|tags\/(.+))$/.exec(path);
      const repo = m ? gh.releases[m[1]!] : undefined;
      if (!m || !repo) return notFound();
      const rateHeaders = { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '59', 'x-ratelimit-reset': '4102444800' };
      if (m[2] === 'latest') return repo.latest ? json(githubRelease(m[1]!, repo.latest, origin, 1), req, rateHeaders) : notFound();
      const tag = m[3]!;
      const tagged = repo.byTag?.[tag] ?? (repo.latest?.tag_name === tag ? repo.latest : undefined);
      return tagged ? json(githubRelease(m[1]!, tagged, origin, 2), req, rateHeaders) : notFound();
    }),
    { releases: init.releases, assets: init.assets ?? {} },
  );
  return gh;
}

export interface FakeMirror extends FakeServer {
  /** component → file name (`latest.json`, `v1.0.0.json`) → the document, served as JSON. */
  files: Record<string, Record<string, unknown>>;
  assets: Record<string, Uint8Array | string>;
}

/** RELEASE_MIRROR_URL: serves `/{component}/{file}` documents and asset bytes. */
export function startFakeMirror(init: {
  files: Record<string, Record<string, unknown>>;
  assets?: Record<string, Uint8Array | string>;
}): FakeMirror {
  const mirror: FakeMirror = Object.assign(
    startServer((req, path) => {
      const asset = serveAsset(mirror.assets, path);
      if (asset) return asset;
      const m = /^\/([^/]+)\/(.+)$/.exec(path);
      const doc = m ? mirror.files[m[1]!]?.[m[2]!] : undefined;
      return doc === undefined ? new Response('not found', { status: 404 }) : json(doc, req);
    }),
    { files: init.files, assets: init.assets ?? {} },
  );
  return mirror;
}

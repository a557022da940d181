/**
 * Download responses: a single file answers 302 to a short-lived
 * presigned URL; a directory answers a STORE ZIP stream with Content-Length and Range, or a signed
 * link to that same stream in the JSON envelope. HEAD answers the same headers without a body,
 * with the ETag / X-Linked-Size / X-Linked-ETag headers Hugging Face clients read.
 */
import type { AppContext } from '../../app-context';
import type { Caller } from '../../platform/http/auth';
import type { TokenBucketLimiter } from '../../platform/http/rate-limit';
import {
  contentDisposition,
  type ObjectStore,
  rangeNotSatisfiable,
  rangeResponseInit,
  signPath,
  verifySignedPath,
} from '../../platform/storage';
import type { Artifact, RegistryService } from './registry.service';
import { planZip, streamZip, type ZipPlan } from './zip';
import { JSON_TYPE } from '../../platform/http/errors';


export const zipFilename = (a: Artifact) => `${a.slug}-${a.quant}-${a.sdk}.zip`;
const zipLinkPath = (slug: string) => `/api/models/${encodeURIComponent(slug)}/zip`;

export interface DownloadQuery {
  quant: string;
  sdk: string;
  format?: string;
}

export function createDownloads(ctx: AppContext, deps: { registry: RegistryService; store: ObjectStore; limiter: TokenBucketLimiter }) {
  const { registry, store, limiter } = deps;
  const ttlMs = ctx.config.presignTtlMs;
  // Plans are a few small header arrays per artifact; artifacts are immutable, so keep them by id.
  const plans = new Map<string, ZipPlan>();

  function planOf(a: Artifact): ZipPlan {
    let plan = plans.get(a.id);
    if (!plan) {
      plan = planZip(
        a.files.map((f) => ({ name: f.path, size: f.size, crc32: f.crc32, key: f.objectKey })),
        a.createdAt,
      );
      if (plans.size > 1000) plans.clear();
      plans.set(a.id, plan);
    }
    return plan;
  }

  const etagOf = (a: Artifact) => `"${a.contentHash}"`;

  function zipResponse(request: Request, a: Artifact): Response {
    const plan = planOf(a);
    const etag = etagOf(a);
    const init = rangeResponseInit(request, plan.size, etag);
    const headers = {
      ...init.headers,
      'content-type': 'application/zip',
      'content-disposition': contentDisposition(zipFilename(a)),
      'accept-ranges': 'bytes',
      'cache-control': 'no-store',
      etag,
      'x-linked-size': String(plan.size),
      'x-linked-etag': etag,
    };
    if (init.status === 416 && request.method !== 'HEAD') return rangeNotSatisfiable(init.headers);
    if (request.method === 'HEAD') return new Response(null, { status: init.status, headers });
    const { start, end } = init.range!;
    return new Response(
      streamZip(plan, (key, from, to) => store.chunks(key, from, to), start, end, request.signal),
      { status: init.status, headers },
    );
  }

  function json(body: unknown): Response {
    return new Response(JSON.stringify(body), { headers: { 'content-type': JSON_TYPE, 'cache-control': 'no-store' } });
  }

  /** Whether this request starts a download (a resumed range or a HEAD is not a new one). */
  function isNewDownload(request: Request): boolean {
    if (request.method === 'HEAD') return false;
    const range = request.headers.get('range');
    return !range || /^bytes=0-/.test(range.trim());
  }

  return {
    /** GET|HEAD /api/models/{slug}/download for an authenticated caller. */
    async download(request: Request, caller: Caller, slug: string, query: DownloadQuery): Promise<Response> {
      limiter.enforce(caller.keyId ? `key:${caller.keyId}` : `user:${caller.userId}`, 1, 'download rate limit exceeded');
      const artifact = await registry.resolveArtifact(slug, query.quant, query.sdk);
      const wantsJson = query.format === 'json' || (request.headers.get('accept') ?? '').includes('application/json');
      if (isNewDownload(request)) registry.recordDownload(caller, artifact);

      if (artifact.kind === 'directory') {
        if (!wantsJson) return zipResponse(request, artifact);
        const path = signPath(ctx.config.secretKey(), zipLinkPath(slug), { artifact: artifact.id }, ttlMs, ctx.clock.now());
        return json({ mode: 'zip', url: ctx.config.publicUrl + path, filename: zipFilename(artifact) });
      }
      const file = artifact.files[0]!;
      const filename = file.path;
      const url = store.presign(file.objectKey, { filename, ttlMs });
      if (wantsJson) return json({ mode: 'redirect', url, filename });
      const etag = etagOf(artifact);
      return new Response(null, {
        status: 302,
        headers: { location: url, 'cache-control': 'no-store', etag, 'x-linked-size': String(file.size), 'x-linked-etag': etag },
      });
    },

    /** GET|HEAD of a signed ZIP link (the JSON envelope's url); 403 when tampered with or expired. */
    async signedZip(request: Request, slug: string): Promise<Response> {
      const params = verifySignedPath(ctx.config.secretKey(), zipLinkPath(slug), new URL(request.url).searchParams, ctx.clock.now());
      const artifact = await registry.requireArtifactById(params.artifact ?? '');
      return zipResponse(request, artifact);
    },
  };
}

export type Downloads = ReturnType<typeof createDownloads>;

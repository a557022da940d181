import { Elysia } from 'elysia';
import { type authPlugin, type CallerResolver, resolveCaller } from '../../platform/http/auth';
import { AppError } from '../../platform/errors';
import { errorResponse, JSON_TYPE } from '../../platform/http/errors';
import { requestIdOf } from '../../platform/http/request-log';
import type { Logger } from '../../platform/logger';
import { type FsStore, type ObjectStore, SIGNED_OBJECT_PREFIX } from '../../platform/storage';
import type { Downloads } from './registry.download';
import { DownloadEnvelope, DownloadQuery, ModelMetadataBody, ModelRecord, SlugParams } from './registry.schemas';
import type { RegistryService } from './registry.service';
import type { AuditService } from '../audit';


export const registryRoutes = (deps: {
  auth: ReturnType<typeof authPlugin>;
  resolver: CallerResolver;
  log: Logger;
  registry: RegistryService;
  downloads: Downloads;
  store: ObjectStore | FsStore;
  audit: AuditService;
}) => {
  const { registry, downloads, store } = deps;
  const modes = ['session', 'query', 'key'] as const;
  const serveObject = (request: Request, key: string) => {
    if (!('serveSigned' in store)) throw new AppError('not_found', 'not found');
    return store.serveSigned(request, key);
  };
  /**
   * HEAD is answered here, before routing: for a path with parameters Elysia sends HEAD to the GET
   * handler and then reads the whole body to count Content-Length (GiBs for a bundle), and our
   * own `.head()` routes never run.
   */
  async function head(request: Request): Promise<Response | undefined> {
    try {
      return await answerHead(request);
    } catch (err) {
      // Errors thrown before routing do not reach the app's onError: map them the same way here.
      return errorResponse(err, 'UNKNOWN', deps.log, requestIdOf(request));
    }
  }
  async function answerHead(request: Request): Promise<Response | undefined> {
    const url = new URL(request.url);
    const path = url.pathname;
    if (path.startsWith(SIGNED_OBJECT_PREFIX)) return serveObject(request, path.slice(SIGNED_OBJECT_PREFIX.length));
    const m = /^\/api\/models\/([^/]+)\/(download|zip)$/.exec(path);
    if (!m) return undefined;
    let slug: string;
    try {
      slug = decodeURIComponent(m[1]!);
    } catch {
      throw new AppError('not_found', 'model not found');
    }
    if (m[2] === 'zip') return downloads.signedZip(request, slug);
    const caller = await resolveCaller(deps.resolver, request, modes);
    const q = url.searchParams;
    return downloads.download(request, caller, slug, { quant: q.get('quant') ?? '', sdk: q.get('sdk') ?? '', format: q.get('format') ?? undefined });
  }
  return (
    new Elysia({ name: 'cpd/registry' })
      .use(deps.auth)
      .onRequest(({ request }) => (request.method === 'HEAD' ? head(request) : undefined))
      // The catalog is serialized once per change: this is the registry's hottest read.
      .get('/api/models', () => new Response(registry.listModelsJson(), { headers: { 'content-type': JSON_TYPE } }), {
        detail: { summary: 'Model catalog, ordered by slug', tags: ['models'], responses: { 200: { description: 'Array of model records' } } },
      })
      .get('/api/models/:slug', ({ params }) => registry.getModel(params.slug), {
        params: SlugParams,
        response: { 200: ModelRecord },
        detail: { summary: 'One model record', tags: ['models'] },
      })
      .get('/api/models/:slug/download', ({ request, caller, params, query }) => downloads.download(request, caller, params.slug, { quant: query.quant ?? '', sdk: query.sdk ?? '', format: query.format }), {
        auth: [...modes],
        params: SlugParams,
        query: DownloadQuery,
        detail: {
          summary: 'Download an artifact: 302 (file), ZIP stream (directory), or {mode, url, filename} with format=json',
          tags: ['models'],
          responses: { 200: { description: 'ZIP stream or JSON envelope' }, 302: { description: 'Redirect to a presigned URL' } },
        },
        response: { 200: DownloadEnvelope },
      })
      .get('/api/models/:slug/zip', ({ request, params }) => downloads.signedZip(request, params.slug), {
        params: SlugParams,
        detail: { summary: 'Signed ZIP link from the JSON envelope (Range, HEAD)', tags: ['models'] },
      })
      .get(`${SIGNED_OBJECT_PREFIX}*`, ({ request, params }) => serveObject(request, params['*']), {
        detail: { summary: 'Signed object link (local storage)', tags: ['models'] },
      })
      .put(
        '/api/admin/models/:slug',
        async ({ caller, params, body }) => {
          const saved = await registry.updateModel(params.slug, body);
          await deps.audit.record({ actor: { userId: caller.userId, email: caller.email }, action: 'model.update', target: params.slug, details: { ...body } });
          return saved;
        },
        {
        auth: ['admin'],
        params: SlugParams,
        body: ModelMetadataBody,
        response: { 200: ModelRecord },
        detail: { summary: 'Edit a model record (name, family, description)', tags: ['models'] },
        },
      )
  );
};

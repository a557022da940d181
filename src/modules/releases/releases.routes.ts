import { Elysia } from 'elysia';
import type { Config } from '../../config';
import { publicText, renderPage } from '../site';
import { downloadsBody } from './releases.page';
import type { Component } from './releases.schemas';
import { ReleaseSchema } from './releases.schemas';
import type { ReleasesService } from './releases.service';
import { JSON_TYPE } from '../../platform/http/errors';

/** True when an If-None-Match header (a list, weak forms, or `*`) matches our strong ETag. */
export function etagMatches(ifNoneMatch: string | null, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t.replace(/^W\//, '') === etag;
  });
}

// Clients and proxies may keep the JSON for a minute; the ETag makes revalidation cheap.
const CACHE_CONTROL = 'public, max-age=60';

async function latestResponse(releases: ReleasesService, component: Component, request: Request): Promise<Response> {
  const { release, etag } = await releases.latestCached(component);
  const headers = { etag, 'cache-control': CACHE_CONTROL };
  if (etagMatches(request.headers.get('if-none-match'), etag)) return new Response(null, { status: 304, headers });
  return new Response(JSON.stringify(release), { headers: { ...headers, 'content-type': JSON_TYPE } });
}

const doc = (component: Component) => ({
  detail: {
    summary: `Latest ${component} release`,
    description: 'No auth. Answers 304 to a matching If-None-Match; 502 when the release source is down and nothing is cached.',
    tags: ['releases'],
  },
  response: { 200: ReleaseSchema },
});

export const releasesRoutes = (releases: ReleasesService, site: Config['site']) =>
  new Elysia({ name: 'cpd/releases' })
    .get('/api/download/engine-latest', ({ request }) => latestResponse(releases, 'engine', request), doc('engine'))
    .get('/api/download/router-latest', ({ request }) => latestResponse(releases, 'router', request), doc('router'))
    .get('/api/download/agent-latest', ({ request }) => latestResponse(releases, 'agent', request), doc('agent'))
    .get('/api/download/memo-latest', ({ request }) => latestResponse(releases, 'memo', request), doc('memo'))
    .get(
      '/downloads',
      async ({ request }) => {
        const { language, text } = publicText(site, request);
        return renderPage({ language, text, title: `${text.downloads.title} · cpd`, body: downloadsBody(await releases.overview(), text) });
      },
      { detail: { summary: 'Downloads page (HTML)', tags: ['releases'] } },
    );

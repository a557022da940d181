/**
 * HTTP metrics and the scrape endpoint.
 *
 * cpd_http_requests_total{method,route,status} and cpd_http_request_duration_seconds{method,route}
 * are recorded once per request, when the response is handed to the server (for a stream: when its
 * headers leave, so a stream's duration is its time to first token). `route` is the route
 * template Elysia matched (`/api/models/:slug`), never the raw path, so ids do not become label
 * values; a request that matched no route is `unmatched`.
 *
 * GET /metrics: with METRICS_TOKEN set, only `Authorization: Bearer <token>`; without it, only a
 * client on a loopback socket that is not a forwarded request (no Forwarded / X-Forwarded-For /
 * X-Real-IP header): a reverse proxy on the same host connects from loopback too, and must not
 * open the metrics to the internet.
 */
import { Elysia } from 'elysia';
import { safeEqual } from '../crypto';
import { AppError } from '../errors';
import { HotCounter, HotHistogram } from '../metrics/hot';
import type { MetricsRegistry } from '../metrics/registry';
import { requestStartOf } from './request-log';

/** Seconds; from a cached route answer (well under 1 ms) to a long model completion. */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Methods a client may send are any token: others share one label value, so the label stays bounded. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

/** The HTTP metrics' recorder: one call per answered request (bench/metrics.ts times it). */
export function httpMetrics(registry: MetricsRegistry) {
  const requests = new HotCounter('cpd_http_requests_total', 'HTTP requests answered, by method, route template and status', ['method', 'route', 'status']).register(registry);
  const durations = new HotHistogram('cpd_http_request_duration_seconds', 'HTTP request duration until the response is handed to the server (a stream: its headers), by method and route template', ['method', 'route'], DURATION_BUCKETS).register(registry);
  return (method: string, route: string, status: number, seconds: number | undefined) => {
    requests.inc([method, route, status]);
    if (seconds !== undefined) durations.observe([method, route], seconds);
  };
}

export function httpMetricsPlugin(registry: MetricsRegistry) {
  const record = httpMetrics(registry);
  return new Elysia({ name: 'cpd/http-metrics' }).onAfterResponse({ as: 'global' }, (ctx) => {
    const { request, set } = ctx;
    const responseValue = (ctx as { responseValue?: unknown }).responseValue;
    const status = responseValue instanceof Response ? responseValue.status : typeof set.status === 'number' ? set.status : 200;
    const started = requestStartOf(request);
    record(METHODS.has(request.method) ? request.method : 'OTHER', (ctx as { route?: string }).route || 'unmatched', status, started === undefined ? undefined : (performance.now() - started) / 1000);
  });
}

export function metricsRoutes(deps: { registry: MetricsRegistry; token: string | null }) {
  const { registry, token } = deps;
  return new Elysia({ name: 'cpd/metrics' }).get(
    '/metrics',
    async ({ request, server }) => {
      if (token !== null) {
        const given = request.headers.get('authorization')?.match(/^Bearer (.+)$/i)?.[1] ?? '';
        if (!safeEqual(given, token)) throw new AppError('unauthorized', 'a valid METRICS_TOKEN bearer token is required');
      } else {
        const forwarded = request.headers.has('forwarded') || request.headers.has('x-forwarded-for') || request.headers.has('x-real-ip');
        const address = server?.requestIP(request)?.address ?? '';
        if (forwarded || !LOOPBACK.test(address)) throw new AppError('unauthorized', 'metrics are served to loopback clients only unless METRICS_TOKEN is set');
      }
      const { text, contentType } = await registry.scrape();
      return new Response(text, { headers: { 'content-type': contentType } });
    },
    { detail: { summary: 'Prometheus metrics (METRICS_TOKEN bearer, or loopback clients when unset)', tags: ['operations'] } },
  );
}

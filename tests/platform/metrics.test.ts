/** GET /metrics: who may scrape, and counters that move by exactly what was done. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { fundedUser, type Harness, startHarness } from '../modules/gateway/gateway-harness';
import { createMetricsRegistry } from '../../src/platform/metrics/registry';
import { createTestApp } from '../support/app';
import { parseMetrics, scrape } from '../support/prometheus';

let h: Harness;
let metricsUrl: string;

beforeAll(async () => {
  h = await startHarness();
  await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_million_tokens', price: 1000 }]);
  metricsUrl = `${h.baseUrl}/metrics`;
});
afterAll(() => h.close());

describe('metrics', () => {
  test('after N gateway calls the gateway, token, cost and HTTP counters moved by exactly N (and their tokens and cost)', async () => {
    const u = await fundedUser(h, 10_000_000n);
    const before = await scrape(metricsUrl);
    const N = 4;
    for (let i = 0; i < N; i++) await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
    for await (const _ of await u.client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true })) void _;
    await u.client.embeddings.create({ model: 'm1', input: 'a b' });
    await u.client.responses.create({ model: 'm1', input: 'hi' });
    // A refused request: an unknown model is no label value (bounded cardinality), it counts only as HTTP 404.
    expect((await fetch(`${h.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${u.key.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'secret-model-name', messages: [{ role: 'user', content: 'x' }] }) })).status).toBe(404);
    await h.t.services.router.flushUsage();
    const after = await scrape(metricsUrl);
    const delta = (name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);

    expect(delta('cpd_gateway_requests_total', { model: 'm1', status: '200' })).toBe(N + 3);
    // chat: 10 + 5 tokens each; embeddings: 2 input tokens; responses: 10 + 5.
    expect(delta('cpd_gateway_tokens_total', { model: 'm1', kind: 'prompt' })).toBe(10 * (N + 1) + 2 + 10);
    expect(delta('cpd_gateway_tokens_total', { model: 'm1', kind: 'completion' })).toBe(5 * (N + 1) + 5);
    expect(delta('cpd_gateway_cost_micros_total', { model: 'm1', currency: 'USD' })).toBe(1000 * (15 * (N + 1) + 2 + 15));
    expect(after.labelValues('cpd_gateway_requests_total', 'model')).toEqual(['m1']);

    expect(delta('cpd_http_requests_total', { method: 'POST', route: '/v1/chat/completions', status: '200' })).toBe(N + 1);
    expect(delta('cpd_http_requests_total', { method: 'POST', route: '/v1/chat/completions', status: '404' })).toBe(1);
    expect(delta('cpd_http_requests_total', { method: 'POST', route: '/v1/embeddings', status: '200' })).toBe(1);
    expect(delta('cpd_http_requests_total', { method: 'POST', route: '/v1/responses', status: '200' })).toBe(1);
    expect(delta('cpd_http_request_duration_seconds_count', { method: 'POST', route: '/v1/chat/completions' })).toBe(N + 2);
    expect(after.typeOf('cpd_http_request_duration_seconds')).toBe('histogram');
  });

  test('route labels are templates, never raw ids; unmatched paths share one label', async () => {
    await fetch(`${h.baseUrl}/api/models/some-private-slug-42`);
    await fetch(`${h.baseUrl}/no/such/path/xyz-123`);
    const m = await scrape(metricsUrl);
    const routes = m.labelValues('cpd_http_requests_total', 'route');
    expect(routes).toContain('/api/models/:slug');
    expect(routes).toContain('unmatched');
    expect(routes.some((r) => r.includes('some-private-slug-42') || r.includes('xyz-123'))).toBe(false);
  });

  test('backends, usage queue, payments, runtime and process metrics are exposed', async () => {
    const u = await fundedUser(h, 0n);
    const before = await scrape(metricsUrl);
    const created = await h.t.request('POST', '/api/billing/payments', { token: u.user.token, body: { provider: 'card', amount: 10, currency: 'USD' } });
    expect(created.status).toBe(201);
    await h.t.request('POST', `/api/payments/sandbox/${created.body.id}/pay`);
    const failed = await h.t.request('POST', '/api/billing/payments', { token: u.user.token, body: { provider: 'card', amount: 10, currency: 'USD' } });
    await h.t.request('POST', `/api/payments/sandbox/${failed.body.id}/fail`);
    const m = await scrape(metricsUrl);
    const delta = (status: string) => m.value('cpd_payments_total', { provider: 'card', status }) - before.value('cpd_payments_total', { provider: 'card', status });
    expect([delta('pending'), delta('paid'), delta('failed')]).toEqual([2, 1, 1]);

    expect(m.value('cpd_router_backend_up', { model: 'm1', backend: h.up.url })).toBe(1);
    // A backend added at run time with an API key: listed by its URL, its key nowhere.
    const admin = await fundedUser(h, 0n, { admin: true });
    const put = await h.t.request('PUT', '/api/admin/router/backends', { token: admin.user.token, body: { backends: [{ model: 'm1', url: 'http://127.0.0.1:9/v1', api_key: 'sk-never-in-metrics' }] } });
    expect(put.status).toBe(200);
    const withAdmin = await scrape(metricsUrl);
    expect(withAdmin.labelValues('cpd_router_backend_up', 'backend')).toContain('http://127.0.0.1:9/v1');
    expect(withAdmin.text).not.toContain('sk-never-in-metrics');
    await h.t.request('PUT', '/api/admin/router/backends', { token: admin.user.token, body: { backends: [] } });
    expect(m.samples.find((s) => s.name === 'cpd_router_backend_inflight' && s.labels.backend === h.up.url)?.value).toBe(0);
    expect(m.samples.find((s) => s.name === 'cpd_usage_pending')?.value).toBe(0);
    expect(m.typeOf('cpd_runtime_engine_state')).toBe('gauge');
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) expect(m.typeOf(name)).toBeDefined();
    // Left out: under Bun their source walks the whole heap on the event loop at every scrape.
    expect(m.text).not.toContain('nodejs_heap_space_size');
  });

  test('the formatter is made and scraped without walking the heap (v8.getHeapSpaceStatistics, which Bun answers by visiting every object)', async () => {
    const v8 = require('node:v8') as typeof import('node:v8');
    const original = v8.getHeapSpaceStatistics;
    let walks = 0;
    v8.getHeapSpaceStatistics = () => {
      walks++;
      return original();
    };
    try {
      const registry = createMetricsRegistry();
      const { text } = await registry.scrape();
      expect(text).toContain('nodejs_heap_size_used_bytes');
      expect(text).not.toContain('nodejs_heap_space_size');
      expect(walks).toBe(0);
    } finally {
      v8.getHeapSpaceStatistics = original;
    }
  });

  test('without METRICS_TOKEN: loopback only, and a forwarded request is not a loopback client (401 {error})', async () => {
    for (const header of ['x-forwarded-for', 'forwarded', 'x-real-ip']) {
      const res = await fetch(metricsUrl, { headers: { [header]: '127.0.0.1' } });
      expect([header, res.status]).toEqual([header, 401]);
      expect(await res.json()).toEqual({ error: expect.any(String) });
    }
    // app.handle has no socket: no client address, so not loopback.
    expect((await h.t.request('GET', '/metrics')).status).toBe(401);
  });

  test('with METRICS_TOKEN: the bearer token and nothing else', async () => {
    const t = await createTestApp('pglite', { METRICS_TOKEN: 'metrics-token-0123456789' });
    try {
      expect((await t.request('GET', '/metrics')).status).toBe(401);
      expect((await t.request('GET', '/metrics', { token: 'metrics-token-wrong-000' })).status).toBe(401);
      const ok = await t.request('GET', '/metrics', { token: 'metrics-token-0123456789' });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('content-type')).toContain('text/plain');
      expect(parseMetrics(ok.text).typeOf('cpd_http_requests_total')).toBe('counter');
    } finally {
      await t.close();
    }
  });
});

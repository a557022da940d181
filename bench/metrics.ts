/**
 * What metrics cost a request (issue 16), in one process, one run:
 *  1. the recording a gateway request does, measured alone: the HTTP recorder (a counter and a
 *     histogram by method and route template) plus the router's (requests, prompt and completion
 *     tokens, cost by model), through platform/metrics/hot.ts as the code does, against the same
 *     recording through prom-client's own Counter and Histogram (which hash the label object on
 *     every call; the reason hot.ts exists), and against an empty function of the same shape
 *     (the baseline);
 *  2. a whole request through Elysia (app.handle on a small route, with the request log as in
 *     app.ts) with and without the metrics plugin: the added time per request.
 * Target: recording ≤ 1 µs per request. The gateway's end-to-end cost is bench/gateway.ts (added
 * p50 at c=1, metrics on).
 *
 *   bun bench/metrics.ts          (N=2000000 to change the iterations of part 1)
 */
import { Elysia } from 'elysia';
import { Counter, Histogram, Registry } from 'prom-client';
import { createRouterMetrics } from '../src/modules/router/router.metrics';
import { httpMetrics, httpMetricsPlugin } from '../src/platform/http/metrics';
import { requestLogPlugin } from '../src/platform/http/request-log';
import { createLogger } from '../src/platform/logger';
import { createMetricsRegistry } from '../src/platform/metrics/registry';

const N = Number(process.env.N ?? 1_000_000);
const REQUESTS = Number(process.env.REQUESTS ?? 100_000);
const ROUTES = ['/v1/chat/completions', '/v1/embeddings', '/api/models/:slug', '/healthz'];
const MODELS = ['m1', 'm2', 'm3'];

function timeNs(n: number, fn: (i: number) => void): number {
  for (let i = 0; i < Math.min(n, 50_000); i++) fn(i); // warm-up (JIT)
  const start = Bun.nanoseconds();
  for (let i = 0; i < n; i++) fn(i);
  return (Bun.nanoseconds() - start) / n;
}

// 1. Recording alone.
const registry = createMetricsRegistry();
const recordHttp = httpMetrics(registry);
const router = createRouterMetrics(registry, 'USD', { backends: () => [], usage: () => ({ queued: 0, setAside: 0 }) });
const hot = (i: number) => {
  recordHttp('POST', ROUTES[i & 3]!, 200, 0.0004);
  router.metered(MODELS[i % 3]!, 200, 10, 5, 15_000n);
};

const plain = new Registry();
const pReq = new Counter({ name: 'a_total', help: 'a', labelNames: ['method', 'route', 'status'], registers: [plain] });
const pDur = new Histogram({ name: 'b_seconds', help: 'b', labelNames: ['method', 'route'], buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers: [plain] });
const pGw = new Counter({ name: 'c_total', help: 'c', labelNames: ['model', 'status'], registers: [plain] });
const pTok = new Counter({ name: 'd_total', help: 'd', labelNames: ['model', 'kind'], registers: [plain] });
const pCost = new Counter({ name: 'e_total', help: 'e', labelNames: ['model', 'currency'], registers: [plain] });
const promClient = (i: number) => {
  const route = ROUTES[i & 3]!;
  const model = MODELS[i % 3]!;
  pReq.inc({ method: 'POST', route, status: '200' });
  pDur.observe({ method: 'POST', route }, 0.0004);
  pGw.inc({ model, status: '200' });
  pTok.inc({ model, kind: 'prompt' }, 10);
  pTok.inc({ model, kind: 'completion' }, 5);
  pCost.inc({ model, currency: 'USD' }, 15_000);
};

let sink = 0;
const empty = (i: number) => {
  sink += ROUTES[i & 3]!.length + MODELS[i % 3]!.length;
};

const baseNs = timeNs(N, empty);
const hotNs = timeNs(N, hot);
const unhotNs = timeNs(N, promClient);
console.log(`recording per request (${N} iterations):`);
console.log(`  baseline (empty)          ${baseNs.toFixed(1)} ns`);
console.log(`  cpd (hot.ts series)       ${hotNs.toFixed(1)} ns   ${(hotNs / baseNs).toFixed(1)}× baseline`);
console.log(`  prom-client Counter/Hist. ${unhotNs.toFixed(1)} ns   ${(unhotNs / hotNs).toFixed(1)}× cpd`);

// 2. Through Elysia.
const silent = createLogger('silent');
const without = new Elysia().use(requestLogPlugin(silent)).get('/api/models/:slug', ({ params }) => ({ slug: params.slug }));
const withMetrics = new Elysia()
  .use(requestLogPlugin(silent))
  .use(httpMetricsPlugin(createMetricsRegistry()))
  .get('/api/models/:slug', ({ params }) => ({ slug: params.slug }));

async function perRequestUs(app: { handle(request: Request): Promise<Response> }): Promise<number> {
  const run = async (n: number) => {
    for (let i = 0; i < n; i++) await (await app.handle(new Request(`http://localhost/api/models/m${i & 7}`))).arrayBuffer();
  };
  await run(5_000);
  const start = Bun.nanoseconds();
  await run(REQUESTS);
  return (Bun.nanoseconds() - start) / REQUESTS / 1000;
}

// Interleaved rounds, best of each: the machine's other load touches both sides alike.
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const a: number[] = [];
const b: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  a.push(await perRequestUs(without));
  b.push(await perRequestUs(withMetrics));
}
const base = Math.min(...a);
const metered = Math.min(...b);
console.log(`Elysia request (${REQUESTS} × ${ROUNDS} rounds, best round; noisy on a shared machine):`);
console.log(`  without metrics  ${base.toFixed(2)} µs`);
console.log(`  with metrics     ${metered.toFixed(2)} µs   added ${(metered - base).toFixed(2)} µs (${(metered / base).toFixed(3)}× baseline)`);
const ok = hotNs - baseNs <= 1000;
console.log(`target: recording ≤ 1 µs per request: ${ok ? 'met' : 'NOT met'} (${((hotNs - baseNs) / 1000).toFixed(3)} µs)`);
if (sink < 0) console.log(sink);
if (!ok) process.exit(1);

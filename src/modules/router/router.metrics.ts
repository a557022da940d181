/**
 * The router's metrics. Per metered request: cpd_gateway_requests_total{model,status},
 * cpd_gateway_tokens_total{model,kind} (kind prompt|completion) and
 * cpd_gateway_cost_micros_total{model,currency}; `model` is always a priced model slug (what
 * served, or the first candidate of a refused request), so its values are bounded by the price
 * list. Read at scrape time, so they cost requests nothing: cpd_router_backend_up and
 * cpd_router_backend_inflight{model,backend} from the backend registry (whatever registered the
 * backend: MODEL_BACKENDS, the admin API, a supervised engine; a disabled backend is not in
 * rotation and not listed; its key never appears), cpd_router_breaker_state{model,backend} (0
 * closed, 1 open, 2 half-open; absent with ROUTER_BREAKER=off), cpd_usage_pending (usage rows waiting for their
 * batch) and cpd_usage_set_aside (rows that could not be written since start).
 */
import { type GaugeCollect, HotCounter, ScrapeGauge } from '../../platform/metrics/hot';
import type { MetricsRegistry } from '../../platform/metrics/registry';
import type { BackendView } from './router.backends';
import type { BreakerState } from './router.breaker';

const BREAKER_STATE_VALUE: Record<BreakerState, number> = { closed: 0, open: 1, 'half-open': 2 };

export function createRouterMetrics(registry: MetricsRegistry, currency: string, sources: { backends: () => BackendView[]; usage: () => { queued: number; setAside: number } }) {
  const counter = (name: string, help: string, labelNames: string[]) => new HotCounter(name, help, labelNames).register(registry);
  const requests = counter('cpd_gateway_requests_total', 'Metered gateway requests, by served model and status', ['model', 'status']);
  const tokens = counter('cpd_gateway_tokens_total', 'Tokens metered, by model and kind (prompt, completion)', ['model', 'kind']);
  const cost = counter('cpd_gateway_cost_micros_total', 'Cost billed, in micro-units of the site currency, by model', ['model', 'currency']);
  // One router per process: its gauges read that router's backend registry and usage writer.
  const gauge = (name: string, help: string, collect: GaugeCollect) => new ScrapeGauge(name, help, collect).register(registry);
  gauge('cpd_router_backend_up', '1 when the backend is in rotation (healthy), 0 while it is backed off', (report) => {
    for (const b of sources.backends()) if (b.enabled) report(b.healthy ? 1 : 0, { model: b.model, backend: b.url });
  });
  gauge('cpd_router_backend_inflight', 'Requests in flight on the backend', (report) => {
    for (const b of sources.backends()) if (b.enabled) report(b.inflight, { model: b.model, backend: b.url });
  });
  gauge('cpd_router_breaker_state', "The backend's circuit breaker in this process: 0 closed, 1 open, 2 half-open", (report) => {
    for (const b of sources.backends()) if (b.enabled && b.breaker) report(BREAKER_STATE_VALUE[b.breaker.state], { model: b.model, backend: b.url });
  });
  gauge('cpd_usage_pending', 'Usage rows (with their wallet debits) waiting to be committed to the database', (report) => report(sources.usage().queued));
  gauge('cpd_usage_set_aside', 'Usage rows that could not be written since start, kept in router_usage_set_aside', (report) => report(sources.usage().setAside));

  return {
    /** One metered request. */
    metered(model: string, status: number, promptTokens: number, completionTokens: number, costMicros: bigint) {
      requests.inc([model, status]);
      if (promptTokens) tokens.inc([model, 'prompt'], promptTokens);
      if (completionTokens) tokens.inc([model, 'completion'], completionTokens);
      if (costMicros) cost.inc([model, currency], Number(costMicros));
    },
  };
}

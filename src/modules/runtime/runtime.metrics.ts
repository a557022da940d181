/**
 * cpd_runtime_engine_state{name,state}: for each supervised process, 1 on its current state and 0
 * on the others (the usual Prometheus state-set shape, so `== 1` selects and alerts need no
 * string matching). Read at scrape time.
 */
import { ScrapeGauge } from '../../platform/metrics/hot';
import type { MetricsRegistry } from '../../platform/metrics/registry';
import type { ProcessState, ProcessStatus } from './runtime.process';

const STATES: ProcessState[] = ['starting', 'ready', 'backoff', 'failed', 'stopped'];

export function registerRuntimeMetrics(registry: MetricsRegistry, status: () => ProcessStatus[]) {
  new ScrapeGauge('cpd_runtime_engine_state', 'Supervised engine and router processes: 1 on the current state, 0 on the others', (report) => {
    for (const p of status()) for (const state of STATES) report(p.state === state ? 1 : 0, { name: p.name, state });
  }).register(registry);
}

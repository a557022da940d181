/**
 * cpd_runtime_engine_state{name,state}: for each supervised process, 1 on its current state and 0
 * on the others (the usual Prometheus state-set shape, so `== 1` selects and alerts need no
 * string matching). Read at scrape time.
 */
import { Gauge } from 'prom-client';
import { type MetricsRegistry, metricOnce } from '../../platform/metrics/registry';
import type { ProcessState, ProcessStatus } from './runtime.process';

const STATES: ProcessState[] = ['starting', 'ready', 'backoff', 'failed', 'stopped'];

export function registerRuntimeMetrics(registry: MetricsRegistry, status: () => ProcessStatus[]) {
  metricOnce(
    registry,
    'cpd_runtime_engine_state',
    (registers) =>
      new Gauge({
        name: 'cpd_runtime_engine_state',
        help: 'Supervised engine and router processes: 1 on the current state, 0 on the others',
        labelNames: ['name', 'state'],
        registers,
        collect() {
          this.reset();
          for (const p of status()) for (const state of STATES) this.set({ name: p.name, state }, p.state === state ? 1 : 0);
        },
      }),
  );
}

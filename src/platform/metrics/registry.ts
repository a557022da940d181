/**
 * Prometheus metrics: one prom-client registry per app (so two apps in one test process never
 * share counters), holding the client library's process and runtime metrics (CPU, memory, open
 * file descriptors, event loop lag, heap) and each module's own `cpd_*` metrics.
 *
 * Label values must come from bounded sets (route templates, priced model slugs, status codes):
 * every distinct tuple is a series kept for the life of the process. Metrics recorded on every
 * request are hot.ts's; those read at scrape time are prom-client gauges with collect().
 */
import { collectDefaultMetrics, Registry } from 'prom-client';

export type MetricsRegistry = Registry;

export function createMetricsRegistry(): MetricsRegistry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/**
 * The registry's metric of that name, made by `make` the first time: a second service built on
 * the same context (tests run two billing services as two "processes") shares the first's metric
 * instead of failing on a duplicate name.
 */
export function metricOnce<M>(registry: MetricsRegistry, name: string, make: (registers: MetricsRegistry[]) => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make([registry]);
}

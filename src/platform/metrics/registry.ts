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

const processMetricsAdded = new WeakSet<MetricsRegistry>();

/**
 * The client library's process and runtime metrics cost ~2.5 ms to set up, all before the first
 * request: they are added 1 s after start (start-up time, docs/operations.md), or by the first
 * scrape if that comes sooner (scrapeText).
 */
export function createMetricsRegistry(): MetricsRegistry {
  const registry = new Registry();
  setTimeout(() => addProcessMetrics(registry), 1000).unref();
  return registry;
}

function addProcessMetrics(registry: MetricsRegistry) {
  if (processMetricsAdded.has(registry)) return;
  processMetricsAdded.add(registry);
  collectDefaultMetrics({ register: registry });
}

/** The registry in Prometheus' text format, process metrics included. */
export function scrapeText(registry: MetricsRegistry): Promise<string> {
  addProcessMetrics(registry);
  return registry.metrics();
}

/**
 * The registry's metric of that name, made by `make` the first time: a second service built on
 * the same context (tests run two billing services as two "processes") shares the first's metric
 * instead of failing on a duplicate name.
 */
export function metricOnce<M>(registry: MetricsRegistry, name: string, make: (registers: MetricsRegistry[]) => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make([registry]);
}

/**
 * Prometheus metrics: one prom-client registry per app (so two apps in one test process never
 * share counters), holding the client library's process and runtime metrics (CPU, memory, open
 * file descriptors, event loop lag, heap) and each module's own `cpd_*` metrics.
 *
 * Hot-path recording goes through `children`: prom-client resolves a label set by hashing it on
 * every inc()/observe(); a child looked up once per distinct label tuple and kept skips that
 * (bench/metrics.ts measures both). Label values must come from bounded sets (route templates,
 * priced model slugs, status codes), so the cache stays small.
 */
import { collectDefaultMetrics, type Counter, type Histogram, Registry } from 'prom-client';

export type MetricsRegistry = Registry;

export function createMetricsRegistry(): MetricsRegistry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** The metric's child for a label tuple, made once: `const byRoute = children(counter); byRoute('GET', '/x', '200').inc()`. */
export function children<T extends string>(metric: Counter<T>): (...values: string[]) => Counter.Internal;
export function children<T extends string>(metric: Histogram<T>): (...values: string[]) => Histogram.Internal<T>;
export function children(metric: { labels(...values: string[]): unknown }): (...values: string[]) => unknown {
  const cache = new Map<string, unknown>();
  return (...values) => {
    const key = values.join('\u0000');
    let child = cache.get(key);
    if (!child) {
      child = metric.labels(...values);
      cache.set(key, child);
    }
    return child;
  };
}

/**
 * The registry's metric of that name, made by `make` the first time: a second service built on
 * the same context (tests run two billing services as two "processes") shares the first's metric
 * instead of failing on a duplicate name.
 */
export function metricOnce<M>(registry: MetricsRegistry, name: string, make: (registers: MetricsRegistry[]) => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make([registry]);
}

/**
 * Prometheus metrics: one registry per app (so two apps in one test process never share
 * counters), holding each module's own `cpd_*` metrics and the client library's process and
 * runtime metrics (CPU, memory, open file descriptors, event loop lag, heap size).
 *
 * Label values must come from bounded sets (route templates, priced model slugs, status codes):
 * every distinct tuple is a series kept for the life of the process. The metrics are hot.ts's:
 * counters and histograms recorded on the request path, gauges read at scrape time.
 *
 * prom-client formats them, and is loaded only for that: importing it took 4–7 ms of every
 * start (start-up time, docs/design/start-up.md). It is imported 1 s after start, when its process
 * metrics are added, or by the first scrape if that comes sooner.
 */
import type { Metric, Registry } from 'prom-client';

/** What a registered metric gives the formatter: prom-client's `Metric` shape. */
export interface MetricFamily {
  readonly name: string;
}

/**
 * How often the event loop's lag is sampled (nodejs_eventloop_lag_*). prom-client's default, 10 ms,
 * is a timer that woke an idle cpd 100 times a second, about 1% of a core doing nothing; sampled
 * every 100 ms, a scrape every 15 s still rests on 150 samples, and a stall longer than 100 ms
 * is always caught.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

export class MetricsRegistry {
  private readonly families = new Map<string, MetricFamily>();
  private formatter: Promise<Registry> | null = null;

  constructor() {
    setTimeout(() => void this.promRegistry(), 1000).unref();
  }

  /**
   * Registers `metric`, or answers the one already registered under its name: a second service
   * built on the same context (tests run two billing services as two "processes") shares the
   * first's metric instead of failing on a duplicate name.
   */
  register<M extends MetricFamily>(metric: M): M {
    const existing = this.families.get(metric.name);
    if (existing) return existing as M;
    this.families.set(metric.name, metric);
    // Once prom-client is loaded (or loading: it then registers every family it finds), add it there too.
    void this.formatter?.then((r) => r.getSingleMetric(metric.name) || r.registerMetric(metric as unknown as Metric));
    return metric;
  }

  /** Every metric in Prometheus' text format, and its content type. */
  async scrape(): Promise<{ text: string; contentType: string }> {
    const registry = await this.promRegistry();
    return { text: await registry.metrics(), contentType: registry.contentType };
  }

  private promRegistry(): Promise<Registry> {
    this.formatter ??= Promise.all([import('prom-client'), import('./process')]).then(([{ Registry }, { registerProcessMetrics }]) => {
      const registry = new Registry();
      for (const metric of this.families.values()) registry.registerMetric(metric as unknown as Metric);
      registerProcessMetrics(registry, EVENT_LOOP_SAMPLE_MS);
      return registry;
    });
    return this.formatter;
  }
}

export function createMetricsRegistry(): MetricsRegistry {
  return new MetricsRegistry();
}

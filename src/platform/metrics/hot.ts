/**
 * cpd's metrics: counters and histograms for the request hot path, and gauges read at scrape
 * time. They only hold the numbers; the registry has prom-client format them (registry.ts).
 *
 * Why not prom-client's own Counter and Histogram here: they find a series by hashing its label
 * object on every inc()/observe(), also through labels() children, which rebind to the same call.
 * bench/metrics.ts measured about 0.37 µs per call, 2.3 µs for the six a gateway request records:
 * over the 1 µs budget. Here a series is found through one Map per label level, on the caller's
 * own strings (whose hashes are cached) and numbers, with no key built, and is updated in place
 * (docs/decisions/0005-hot-path-metrics.md).
 */
import type { MetricsRegistry } from './registry';

interface Series<V> {
  labels: Record<string, string>;
  data: V;
}

/** A label value: a string, or a number (a status code) written out as its decimal text. */
export type LabelValue = string | number;

type Node<V> = Map<LabelValue, Node<V> | Series<V>>;

abstract class HotFamily<V> {
  /** Series by label values, one map level per label: lookups on the caller's own strings and numbers build no key. */
  private readonly root: Node<V> = new Map();
  private readonly series: Series<V>[] = [];

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {}

  protected abstract fresh(): V;

  /** The series for these label values (in labelNames order), made on first use. */
  protected seriesOf(values: readonly LabelValue[]): V {
    let node = this.root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = node.get(values[i]!) as Node<V> | undefined;
      if (!next) {
        next = new Map();
        node.set(values[i]!, next);
      }
      node = next;
    }
    let s = node.get(values[last]!) as Series<V> | undefined;
    if (!s) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((n, i) => {
        labels[n] = String(values[i]);
      });
      s = { labels, data: this.fresh() };
      node.set(values[last]!, s);
      this.series.push(s);
    }
    return s.data;
  }

  protected all(): readonly Series<V>[] {
    return this.series;
  }

  /** Adds the family to the registry, or answers the one already there under this name. */
  register<T>(this: T & HotFamily<V>, registry: MetricsRegistry): T {
    return registry.register(this);
  }
}

export class HotCounter extends HotFamily<{ value: number }> {
  readonly type = 'counter';
  readonly aggregator = 'sum';

  protected fresh() {
    return { value: 0 };
  }

  inc(values: readonly LabelValue[], by = 1): void {
    this.seriesOf(values).value += by;
  }

  get() {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: [...this.all()].map((s) => ({ labels: s.labels, value: s.data.value })) };
  }
}

interface HistogramData {
  counts: number[];
  sum: number;
  count: number;
}

export class HotHistogram extends HotFamily<HistogramData> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';

  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    /** Upper bounds, ascending; +Inf is implied. */
    readonly buckets: readonly number[],
  ) {
    super(name, help, labelNames);
  }

  protected fresh(): HistogramData {
    return { counts: new Array(this.buckets.length).fill(0), sum: 0, count: 0 };
  }

  observe(values: readonly LabelValue[], v: number): void {
    const d = this.seriesOf(values);
    const b = this.buckets;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    if (i < b.length) d.counts[i]!++;
    d.sum += v;
    d.count++;
  }

  get() {
    const values: Array<{ metricName: string; labels: Record<string, string | number>; value: number }> = [];
    for (const { labels, data } of this.all()) {
      let cumulative = 0;
      this.buckets.forEach((le, i) => {
        cumulative += data.counts[i]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le }, value: cumulative });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: data.count });
      values.push({ metricName: `${this.name}_sum`, labels, value: data.sum });
      values.push({ metricName: `${this.name}_count`, labels, value: data.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

/** Reports the value of each series a scrape-time gauge shows (labels omitted: the one series). */
export type GaugeCollect = (report: (value: number, labels?: Record<string, string>) => void) => void;

/**
 * A gauge read at scrape time (a backend's health, rows waiting): `collect` reports the value of
 * each series it shows, from the module's own state, so requests pay nothing for it.
 */
export class ScrapeGauge {
  readonly type = 'gauge';
  readonly aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly collect: GaugeCollect,
  ) {}

  get() {
    const values: Array<{ labels: Record<string, string>; value: number }> = [];
    this.collect((value, labels = {}) => values.push({ labels, value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** Adds the gauge to the registry, or answers the one already there under this name. */
  register(registry: MetricsRegistry): ScrapeGauge {
    return registry.register(this);
  }
}

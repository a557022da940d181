/**
 * Scrapes a /metrics answer and reads samples from it.
 *
 *   const m = await scrape(`${url}/metrics`);
 *   m.value('cpd_http_requests_total', { method: 'GET', route: '/healthz', status: '200' })   // 0 when absent
 *   m.value('cpd_http_request_duration_seconds_count', { route: '/v1/models' })
 *
 * Hand-written: the exposition format's sample lines are `name{label="value",…} number`, and the
 * npm parser of the format (parse-prometheus-text-format 1.1) merges a labelled histogram's series
 * into one and drops their labels. `make test` also checks the format with promtool.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Scrape {
  text: string;
  samples: Sample[];
  /** `# TYPE` of a metric family (counter, gauge, histogram, …). */
  typeOf(name: string): string | undefined;
  /** The sum of the samples named `name` whose labels include `labels`; 0 when none match. */
  value(name: string, labels?: Record<string, string>): number;
  /** Every value the samples named `name` carry for `label`. */
  labelValues(name: string, label: string): string[];
}

const SAMPLE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g;
const unescapeLabel = (v: string) => v.replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));

export function parseMetrics(text: string): Scrape {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name!, type!);
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(LABEL)) labels[k!] = unescapeLabel(v!);
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  const matching = (name: string, labels: Record<string, string>) => samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return {
    text,
    samples,
    typeOf: (name) => types.get(name),
    value: (name, labels = {}) => matching(name, labels).reduce((sum, s) => sum + s.value, 0),
    labelValues: (name, label) => [...new Set(matching(name, {}).flatMap((s) => (s.labels[label] === undefined ? [] : [s.labels[label]!])))],
  };
}

export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await fetch(url, { headers });
  if (res.status !== 200) throw new Error(`scrape ${url}: ${res.status} ${await res.text()}`);
  return parseMetrics(await res.text());
}

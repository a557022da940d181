/**
 * deploy/: the Prometheus alert rules load and fire as their promtool unit tests expect, and the
 * alert rules and the Grafana dashboard name only metrics GET /metrics serves; the scrape itself
 * passes promtool's format check.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { createTestApp, type TestApp } from '../support/app';
import { parseMetrics, type Scrape } from '../support/prometheus';

const root = join(import.meta.dir, '../..');
const TOKEN = 'deploy-test-metrics-token';
let t: TestApp;
let scraped: Scrape;

beforeAll(async () => {
  t = await createTestApp('pglite', { METRICS_TOKEN: TOKEN });
  await t.request('GET', '/healthz');
  const res = await t.request('GET', '/metrics', { token: TOKEN });
  expect(res.status).toBe(200);
  scraped = parseMetrics(res.text);
});
afterAll(() => t.close());

function promtool(args: string[], stdin?: string) {
  const p = Bun.spawnSync(['promtool', ...args], { cwd: root, stdin: stdin === undefined ? undefined : new TextEncoder().encode(stdin) });
  return { code: p.exitCode, out: `${p.stdout.toString()}${p.stderr.toString()}` };
}

/** Metric names an expression text uses (histogram series named by their family). */
function metricNames(text: string): string[] {
  const names = text.match(/\b(?:cpd|process|nodejs)_[a-z0-9_]+/g) ?? [];
  return [...new Set(names.map((n) => n.replace(/_(bucket|sum|count)$/, '')))];
}

describe('deploy', () => {
  test('alert rules: promtool checks them and its unit tests fire each alert', () => {
    const check = promtool(['check', 'rules', 'deploy/prometheus-alerts.yml']);
    expect(check.out).toContain('SUCCESS: 7 rules found');
    expect(check.code).toBe(0);
    const unit = promtool(['test', 'rules', 'tests/deploy/prometheus-alerts.rules-test.yml']);
    expect(unit.out).toContain('SUCCESS');
    expect(unit.code).toBe(0);
  });

  test('the scrape passes promtool check metrics (parse and naming lint)', () => {
    const r = promtool(['check', 'metrics'], scraped.text);
    // prom-client's own nodejs_active_*_total gauges break the naming lint; nothing else may.
    const problems = r.out.split('\n').filter((line) => line !== '' && !/^nodejs_active_\w+_total non-counter metrics/.test(line));
    expect(problems).toEqual([]);
    expect(scraped.typeOf('cpd_http_requests_total')).toBe('counter');
  });

  test('alert rules and the dashboard name only metrics the server exposes', async () => {
    const rules = await Bun.file(join(root, 'deploy/prometheus-alerts.yml')).text();
    const dashboard = (await Bun.file(join(root, 'deploy/grafana-dashboard.json')).json()) as { panels: Array<{ targets: Array<{ expr: string }> }> };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((x) => x.expr)).join('\n');
    const used = metricNames(`${rules}\n${exprs}`);
    expect(used.length).toBeGreaterThan(10);
    const missing = used.filter((n) => scraped.typeOf(n) === undefined);
    expect(missing).toEqual([]);
  });
});

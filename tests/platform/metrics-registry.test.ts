/**
 * platform/metrics' registry: cpd's metrics are recorded from the start, prom-client (which
 * formats them) is loaded only by the first scrape or 1 s after start, and whatever was
 * registered before, during or after that load is written out exactly once.
 */
import { describe, expect, test } from 'bun:test';
import { HotCounter, ScrapeGauge } from '../../src/platform/metrics/hot';
import { createMetricsRegistry } from '../../src/platform/metrics/registry';
import { parseMetrics } from '../support/prometheus';

describe('metrics registry', () => {
  test('metrics registered before, while and after prom-client loads are each written once, with the process metrics', async () => {
    const registry = createMetricsRegistry();
    const counter = new HotCounter('cpd_test_total', 'Test counter', ['kind']).register(registry);
    counter.inc(['a'], 3);
    let level = 5;
    new ScrapeGauge('cpd_test_level', 'Test gauge read at scrape time', (report) => report(level)).register(registry);

    const first = registry.scrape();
    // Registered while the formatter loads: it must appear once, not fail as a duplicate.
    new ScrapeGauge('cpd_test_during', 'Registered while prom-client loads', (report) => report(1, { at: 'load' })).register(registry);
    const one = parseMetrics((await first).text);
    expect((await first).contentType).toStartWith('text/plain');
    expect(one.value('cpd_test_total', { kind: 'a' })).toBe(3);
    expect(one.value('cpd_test_level', {})).toBe(5);
    expect(one.value('cpd_test_during', { at: 'load' })).toBe(1);
    expect(one.typeOf('process_cpu_seconds_total')).toBe('counter');

    new HotCounter('cpd_test_after_total', 'Registered after the first scrape', []).register(registry).inc([], 2);
    level = 7;
    const two = parseMetrics((await registry.scrape()).text);
    expect(two.value('cpd_test_after_total', {})).toBe(2);
    expect(two.value('cpd_test_level', {})).toBe(7);
    expect(two.text.split('\n').filter((l) => l.startsWith('# TYPE cpd_test_during ')).length).toBe(1);
  });

  test('a second metric of the same name is the first one (two services on one context share it)', () => {
    const registry = createMetricsRegistry();
    const a = new HotCounter('cpd_test_shared_total', 'Shared', []).register(registry);
    const b = new HotCounter('cpd_test_shared_total', 'Shared', []).register(registry);
    expect(b).toBe(a);
    const g = new ScrapeGauge('cpd_test_shared_level', 'Shared gauge', (r) => r(1));
    expect(registry.register(g)).toBe(g);
    expect(new ScrapeGauge('cpd_test_shared_level', 'Shared gauge', (r) => r(2)).register(registry)).toBe(g);
  });
});

/** Weighted least-loaded choice among a model's backends (the backend set alone: no network, no database). */
import { describe, expect, test } from 'bun:test';
import { createLogger } from '../../../src/platform/logger';
import { createBackendSet } from '../../../src/modules/router/router.backends';
import { routerSettings } from '../../../src/config-router';

const settings = routerSettings(() => undefined, null, {});
const quiet = createLogger('silent');

function setOf(weights: Record<string, number>) {
  const set = createBackendSet(settings, quiet, { now: () => 1_000_000 }); // a fixed clock: backoff never ends
  set.replaceAdmin(Object.entries(weights).map(([name, weight]) => ({ model: 'm', url: `http://${name}/v1`, apiKey: null, weight, enabled: true })));
  const byName = (name: string) => set.candidates('m').find((b) => b.url === `http://${name}/v1`)!;
  const first = () => set.candidates('m')[0]!.url.slice(7, -3);
  return { set, byName, first };
}

describe('weighted least-loaded', () => {
  test('idle: smooth weighted round robin gives exact shares without bursts', () => {
    const { first } = setOf({ a: 3, b: 1, c: 1 });
    const picks = Array.from({ length: 10 }, first);
    expect(picks.filter((p) => p === 'a')).toHaveLength(6);
    expect(picks.filter((p) => p === 'b')).toHaveLength(2);
    expect(picks.filter((p) => p === 'c')).toHaveLength(2);
    expect(picks.slice(0, 5).filter((p) => p === 'a')).toHaveLength(3); // spread, not aaa…
  });

  test('busy: fewest in flight per unit of weight first', () => {
    const { byName, first } = setOf({ a: 3, b: 1 });
    byName('a').inflight = 3; // 1 per unit of weight
    byName('b').inflight = 0; // 0
    expect(first()).toBe('b');
    byName('a').inflight = 2; // 0.67
    byName('b').inflight = 1; // 1
    expect(first()).toBe('a');
  });

  test('a backend in backoff comes last; a disabled one never', () => {
    const { set, byName, first } = setOf({ a: 5, b: 1 });
    set.markFailed(byName('a'), 'boom');
    expect(first()).toBe('b');
    expect(set.candidates('m').map((b) => b.url)).toEqual(['http://b/v1', 'http://a/v1']);
    set.replaceAdmin([
      { model: 'm', url: 'http://a/v1', apiKey: null, weight: 5, enabled: false },
      { model: 'm', url: 'http://b/v1', apiKey: null, weight: 1, enabled: true },
    ]);
    expect(set.candidates('m').map((b) => b.url)).toEqual(['http://b/v1']);
    set.replaceAdmin([{ model: 'm', url: 'http://a/v1', apiKey: null, weight: 5, enabled: false }]);
    expect(set.has('m')).toBe(false);
    expect(set.candidates('m')).toEqual([]);
  });

  test('replacing keeps a backend that stays (its in-flight count), resets its health only when its key changes', () => {
    const { set, byName } = setOf({ a: 1 });
    const a = byName('a');
    a.inflight = 2;
    set.markFailed(a, 'boom');
    set.replaceAdmin([{ model: 'm', url: 'http://a/v1', apiKey: null, weight: 2, enabled: true }]);
    expect(set.list()[0]).toMatchObject({ weight: 2, inflight: 2, healthy: false });
    set.replaceAdmin([{ model: 'm', url: 'http://a/v1', apiKey: 'sk-new', weight: 2, enabled: true }]);
    expect(set.list()[0]).toMatchObject({ inflight: 2, healthy: true, has_api_key: true });
    expect(JSON.stringify(set.list())).not.toContain('sk-new');
  });
});

describe('which client calls a backend', () => {
  test("fetch by default; with ROUTER_UPSTREAM_CLIENT=http1 plain-HTTP backends go over the own client, https: ones and every one behind http_proxy through fetch", () => {
    for (const [env, expected] of [
      [{}, { 'http://a/v1': false, 'https://b/v1': false }],
      [{ ROUTER_UPSTREAM_CLIENT: 'http1' }, { 'http://a/v1': true, 'https://b/v1': false }],
      [{ ROUTER_UPSTREAM_CLIENT: 'http1', http_proxy: 'http://proxy:3128' }, { 'http://a/v1': false, 'https://b/v1': false }],
    ] as const) {
      const get = (name: string) => (env as Record<string, string | undefined>)[name];
      const set = createBackendSet(routerSettings(get, null, {}), quiet);
      set.register('m', 'http://a/v1', { source: 'env' });
      set.register('m', 'https://b/v1', { source: 'env' });
      expect(Object.fromEntries(set.candidates('m').map((b) => [b.url, b.direct]))).toEqual(expected);
    }
  });
});

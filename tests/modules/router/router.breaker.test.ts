/**
 * The circuit breaker per backend (ROUTER_BREAKER): its syntax, its state machine on a hand-moved
 * clock, and through the gateway: a backend failing half its requests is taken out while another
 * serves, client errors never open it, a half-open probe closes it, every change is an audit entry
 * and cpd_router_breaker_state follows. The built binary: tests/modules/router/breaker.binary.test.ts.
 */
import { describe, expect, test } from 'bun:test';
import { ConfigError } from '../../../src/config';
import { parseBreaker, routerSettings } from '../../../src/config-router';
import { createBackendSet } from '../../../src/modules/router/router.backends';
import { createLogger } from '../../../src/platform/logger';
import { type BreakerChange, createBreaker } from '../../../src/modules/router/router.breaker';
import { manualClock } from '../../support/clock';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { scrape } from '../../support/prometheus';
import { fundedUser, startHarness, waitFor } from '../gateway/gateway-harness';

describe('ROUTER_BREAKER', () => {
  test('rate%/attempts/window[/cool-down] or off; anything else names the variable', () => {
    expect(parseBreaker('50%/20/60s/30s')).toEqual({ failureRate: 0.5, minimumAttempts: 20, windowMs: 60_000, coolDownMs: 30_000 });
    expect(parseBreaker('25%/5/2m')).toEqual({ failureRate: 0.25, minimumAttempts: 5, windowMs: 120_000, coolDownMs: 30_000 });
    expect(parseBreaker('off')).toBeNull();
    for (const bad of ['50', '50%/20', '0%/20/60s', '101%/20/60s', '50%/0/60s', '50%/20/soon', '50%/20/60s/30s/1s', 'on'])
      expect(() => parseBreaker(bad)).toThrow(ConfigError);
  });
});

describe('the breaker', () => {
  const settings = { failureRate: 0.5, minimumAttempts: 4, windowMs: 60_000, coolDownMs: 30_000 };
  /** Any request's lease: outside half-open, which request it is does not matter. */
  const request = {};
  const make = () => {
    const clock = manualClock(1_000_000);
    const changes: BreakerChange[] = [];
    const breaker = createBreaker(settings, () => clock.now().getTime(), (c) => changes.push(c));
    return { clock, changes, breaker, moves: () => changes.map((c) => `${c.from}>${c.to}`) };
  };

  test('opens at the rate once the window holds the minimum of attempts; old attempts slide out', () => {
    const { clock, breaker, changes } = make();
    breaker.failed(request);
    breaker.failed(request);
    breaker.failed(request);
    expect(breaker.current()).toBe('closed'); // 3 of 3 failed, but fewer than 4 attempts
    clock.advance(61_000); // those three leave the window
    breaker.succeeded(request);
    breaker.succeeded(request);
    breaker.failed(request);
    expect(breaker.current()).toBe('closed'); // 1 of 3
    breaker.failed(request);
    expect(breaker.current()).toBe('open'); // 2 of 4: 50%
    expect(changes).toEqual([{ from: 'closed', to: 'open', attempts: 4, failures: 2, probeAt: clock.now().getTime() + 30_000 }]);
    expect(breaker.allows()).toBe(false);
    // Outcomes of requests that reach an open backend anyway (the last resort) are not counted.
    breaker.succeeded(request);
    expect(breaker.current()).toBe('open');
  });

  test('half-open after the cool-down: one probe at a time; its success closes with a fresh window', () => {
    const { clock, breaker, moves } = make();
    for (let i = 0; i < 4; i++) breaker.failed(request);
    clock.advance(29_999);
    expect(breaker.current()).toBe('open');
    clock.advance(1);
    expect(breaker.current()).toBe('half-open');
    const first = {};
    breaker.begin(first);
    expect(breaker.allows()).toBe(false); // the probe is out
    breaker.end(first); // ended without a verdict (the client went away): another may probe
    expect(breaker.allows()).toBe(true);
    const probe = {};
    breaker.begin(probe);
    breaker.succeeded(request); // not the probe: another request that reached it (the last resort)
    expect(breaker.current()).toBe('half-open');
    breaker.succeeded(probe);
    expect(breaker.view()).toEqual({ state: 'closed', attempts: 0, failures: 0, probe_at: null });
    expect(moves()).toEqual(['closed>open', 'open>half-open', 'half-open>closed']);
  });

  test('a failed probe opens it again for twice the cool-down, at most eight times it', () => {
    const { clock, breaker, changes } = make();
    for (let i = 0; i < 4; i++) breaker.failed(request);
    const coolDowns: number[] = [];
    for (let i = 0; i < 5; i++) {
      clock.advance(changes.at(-1)!.probeAt! - clock.now().getTime());
      expect(breaker.current()).toBe('half-open');
      const probe = {};
      breaker.begin(probe);
      breaker.failed(probe);
      coolDowns.push(changes.at(-1)!.probeAt! - clock.now().getTime());
    }
    expect(coolDowns).toEqual([60_000, 120_000, 240_000, 240_000, 240_000]);
  });

  test('a reset (new credentials) closes it with an empty window', () => {
    const { breaker, moves } = make();
    for (let i = 0; i < 4; i++) breaker.failed(request);
    breaker.reset();
    expect(breaker.view()).toEqual({ state: 'closed', attempts: 0, failures: 0, probe_at: null });
    breaker.failed(request);
    breaker.reset();
    expect(breaker.view()).toMatchObject({ attempts: 0, failures: 0 });
    expect(moves()).toEqual(['closed>open', 'open>closed']);
  });

  test('a stream that broke after its start adds a failure, not an attempt', () => {
    const { breaker } = make();
    breaker.succeeded(request);
    breaker.succeeded(request);
    breaker.succeeded(request);
    breaker.succeeded(request);
    breaker.brokeAfterSuccess();
    expect(breaker.view()).toMatchObject({ state: 'closed', attempts: 4, failures: 1 });
    breaker.brokeAfterSuccess();
    expect(breaker.current()).toBe('open');
  });
});

describe('the backend set', () => {
  const quiet = createLogger('silent');
  const setWith = (breaker: string) => {
    const set = createBackendSet(
      routerSettings((n) => (n === 'ROUTER_BREAKER' ? breaker : undefined), null, {}),
      quiet,
      { now: () => 0 }, // the backoff over at once: only the breaker keeps a backend out
    );
    set.register('m', 'http://a/v1', { source: 'env' });
    set.register('m', 'http://b/v1', { source: 'env' });
    const [a, b] = set.candidates('m').sort((x, y) => x.url.localeCompare(y.url));
    return { set, a: a!, b: b! };
  };

  test('an open backend leaves the rotation for the last resort; with ROUTER_BREAKER=off nothing does', () => {
    const on = setWith('50%/2/60s');
    on.set.failedRequest(on.a, 'boom', {});
    on.set.failedRequest(on.a, 'boom', {});
    expect(on.set.candidates('m').map((b) => b.url)).toEqual(['http://b/v1']);
    expect(on.set.lastResort('m').map((b) => b.url)).toEqual(['http://a/v1']);
    expect(on.set.list().map((b) => b.breaker?.state)).toEqual(['open', 'closed']);

    const off = setWith('off');
    for (let i = 0; i < 10; i++) off.set.failedRequest(off.a, 'boom', {});
    expect(off.set.candidates('m')).toHaveLength(2);
    expect(off.set.lastResort('m')).toEqual([]);
    expect(off.set.list().map((b) => b.breaker)).toEqual([null, null]);
  });
});

describe('through the gateway', () => {
  const hi = [{ role: 'user' as const, content: 'hi' }];
  const completionsOf = (up: FakeUpstream) => up.requests.filter((r) => r.path.endsWith('/chat/completions')).length;

  /** Two backends of m1: `flaky` fails every other request it gets, `steady` never. */
  async function setUp() {
    const flaky = await startFakeUpstream({ models: ['m1'] });
    const steady = await startFakeUpstream({ models: ['m1'] });
    let n = 0;
    flaky.set(() => (n++ % 2 === 0 ? { status: 500 } : {}));
    const clock = manualClock();
    // No passive backoff worth the name: the breaker alone decides where traffic goes.
    const h = await startHarness({
      upstream: flaky,
      clock,
      backends: `m1=${flaky.url},m1=${steady.url}`,
      env: { ROUTER_BREAKER: '50%/4/60s/30s', ROUTER_BACKOFF: '1ms', ROUTER_BACKOFF_MAX: '1ms', ROUTER_PROBE_INTERVAL: '1h' },
    });
    await h.t.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.001 }]);
    const user = await fundedUser(h, 10_000_000n);
    const breakerOf = (up: FakeUpstream) => h.t.services.router.listBackends().find((b) => b.url === up.url)!.breaker!;
    const breakerEntries = async () => (await h.t.services.audit.list({ limit: 100 })).entries.filter((e) => e.action === 'router.breaker').reverse();
    return {
      h,
      flaky,
      steady,
      clock,
      user,
      breakerOf,
      breakerEntries,
      async close() {
        await h.close();
        await Promise.all([flaky.close(), steady.close()]);
      },
    };
  }

  test('a backend failing half its requests is taken out; a half-open probe puts it back; each change audited and measured', async () => {
    const s = await setUp();
    try {
      // Shared by round robin, every request answered (the failures fail over to the steady one),
      // until the flaky one has failed 2 of its 4 attempts.
      for (let i = 0; i < 8; i++) expect((await s.user.client.chat.completions.create({ model: 'm1', messages: hi })).choices[0]!.message.content).toBeTruthy();
      expect(completionsOf(s.flaky)).toBe(4);
      expect(s.breakerOf(s.flaky)).toMatchObject({ state: 'open', probe_at: new Date(s.clock.now().getTime() + 30_000).toISOString() });
      expect(s.breakerOf(s.steady)).toMatchObject({ state: 'closed', attempts: 6, failures: 0 });
      const metrics = await scrape(`${s.h.baseUrl}/metrics`);
      expect(metrics.typeOf('cpd_router_breaker_state')).toBe('gauge');
      expect(metrics.value('cpd_router_breaker_state', { model: 'm1', backend: s.flaky.url })).toBe(1);
      expect(metrics.value('cpd_router_breaker_state', { model: 'm1', backend: s.steady.url })).toBe(0);

      // Open: no traffic at all.
      for (let i = 0; i < 6; i++) await s.user.client.chat.completions.create({ model: 'm1', messages: hi });
      expect(completionsOf(s.flaky)).toBe(4);

      // After the cool-down one request probes it; it answers, and the breaker closes.
      s.flaky.set({});
      s.clock.advance(30_000);
      expect(s.breakerOf(s.flaky).state).toBe('half-open');
      expect((await scrape(`${s.h.baseUrl}/metrics`)).value('cpd_router_breaker_state', { model: 'm1', backend: s.flaky.url })).toBe(2);
      await s.user.client.chat.completions.create({ model: 'm1', messages: hi });
      expect(completionsOf(s.flaky)).toBe(5);
      expect(s.breakerOf(s.flaky)).toEqual({ state: 'closed', attempts: 0, failures: 0, probe_at: null });

      const entries = await waitFor(s.breakerEntries, 'three breaker audit entries', { until: (e) => e.length === 3 });
      expect(entries.map((e) => `${e.details.from}>${e.details.to}`)).toEqual(['closed>open', 'open>half-open', 'half-open>closed']);
      for (const e of entries) {
        expect(e).toMatchObject({ actor_id: null, actor_email: null, target: `m1 ${s.flaky.url}` });
        expect(e.details).toMatchObject({ model: 'm1', backend: s.flaky.url, via: 'system', replica: expect.stringMatching(/^proc_/) });
      }
      expect(entries[0]!.details).toMatchObject({ attempts: 4, failures: 2 });
    } finally {
      await s.close();
    }
  });

  test('half-open: one probe at a time; meanwhile the other requests go elsewhere', async () => {
    const s = await setUp();
    try {
      for (let i = 0; i < 8; i++) await s.user.client.chat.completions.create({ model: 'm1', messages: hi });
      expect(s.breakerOf(s.flaky).state).toBe('open');
      const gate = Promise.withResolvers<void>();
      s.flaky.set({ hold: { afterFrames: 0, until: gate.promise } });
      s.clock.advance(30_000);
      const probe = s.user.client.chat.completions.create({ model: 'm1', messages: hi });
      await waitFor(() => completionsOf(s.flaky) === 5, 'the probe reaching the flaky backend');
      const steadyBefore = completionsOf(s.steady);
      for (let i = 0; i < 3; i++) await s.user.client.chat.completions.create({ model: 'm1', messages: hi });
      expect(completionsOf(s.steady)).toBe(steadyBefore + 3);
      expect(completionsOf(s.flaky)).toBe(5);
      expect(s.breakerOf(s.flaky).state).toBe('half-open');
      gate.resolve();
      expect((await probe).choices[0]!.message.content).toBeTruthy();
      expect(s.breakerOf(s.flaky).state).toBe('closed');
    } finally {
      await s.close();
    }
  });

  test('a failed probe opens it again; when every backend is open, requests still go to them rather than fail', async () => {
    const s = await setUp();
    try {
      for (let i = 0; i < 8; i++) await s.user.client.chat.completions.create({ model: 'm1', messages: hi });
      expect(s.breakerOf(s.flaky).state).toBe('open');
      s.flaky.set({ status: 503 });
      s.clock.advance(30_000);
      const served = await s.user.client.chat.completions.create({ model: 'm1', messages: hi });
      expect(served.choices[0]!.message.content).toBeTruthy(); // the probe failed over to the steady one
      expect(s.breakerOf(s.flaky)).toMatchObject({ state: 'open', probe_at: new Date(s.clock.now().getTime() + 60_000).toISOString() });

      // The steady one starts failing too, until its breaker opens: then both are open.
      s.steady.set({ status: 500 });
      for (let i = 0; i < 20 && s.breakerOf(s.steady).state !== 'open'; i++) await s.user.client.chat.completions.create({ model: 'm1', messages: hi }).catch(() => {});
      expect(s.breakerOf(s.steady).state).toBe('open');
      // Every backend open: the request is tried on them, the one to be probed first first.
      s.steady.set({ status: null });
      const before = completionsOf(s.steady);
      const lastResort = await s.user.client.chat.completions.create({ model: 'm1', messages: hi });
      expect(lastResort.choices[0]!.message.content).toBeTruthy();
      expect(completionsOf(s.steady)).toBe(before + 1);
      expect(s.breakerOf(s.steady).state).toBe('open'); // only a half-open probe closes it
    } finally {
      await s.close();
    }
  });

  test('client errors are answers: neither the breaker nor the backoff counts them', async () => {
    const s = await setUp();
    try {
      s.flaky.set({ status: 400, errorMessage: 'bad request' });
      s.steady.set({ status: 409, errorMessage: 'conflict' });
      for (let i = 0; i < 10; i++) {
        const status = await s.user.client.chat.completions.create({ model: 'm1', messages: hi }).then(
          () => 200,
          (e) => e.status,
        );
        // The flaky one's 400 is the caller's mistake (400); the steady one's 409 fails over to the flaky one.
        expect(status).toBe(400);
      }
      for (const up of [s.flaky, s.steady]) {
        const view = s.h.t.services.router.listBackends().find((b) => b.url === up.url)!;
        expect(view).toMatchObject({ healthy: true, consecutive_failures: 0, breaker: { state: 'closed', failures: 0 } });
      }
      expect(s.breakerOf(s.flaky).attempts).toBe(10);
    } finally {
      await s.close();
    }
  });
});

/**
 * The supervisor against the fixture engine (stub server + C FFI library) on a real app: bundles
 * come from the registry, engines become router backends, traffic goes through the gateway.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { publishArtifact } from '../../../src/modules/registry';
import { createSupervisor, type Supervisor, type Timings } from '../../../src/modules/runtime';
import { loadConfig } from '../../../src/config';
import { createTestApp, type TestApp } from '../../support/app';
import { makeApiKey, makeUser } from '../../support/make';
import { buildFixtures, livePids, makeBundle, waitFor } from '../../support/runtime-fixtures';
import { scrape } from '../../support/prometheus';

const fx = buildFixtures();
const work = mkdtempSync(join(tmpdir(), 'cpd-supervisor-'));
const pidDir = mkdtempSync(join(tmpdir(), 'cpd-pids-'));
const FAST: Partial<Timings> = {
  backoffBaseMs: 30,
  backoffMaxMs: 200,
  readyTimeoutMs: 15_000,
  crashWindowMs: 20_000,
  crashLoopLimit: 3,
  failedRetryMs: 600_000,
  stopDeadlineMs: 3_000,
  pollMs: 30,
  healthIntervalMs: 500,
};
const runtimeEnv = {
  ARIA_FFI_LIB: fx.engineLib,
  ARIA_ENGINE_BIN: fx.engineBin,
  ARIA_ROUTER_FFI_LIB: fx.routerLib,
  ARIA_ROUTER_BIN: fx.routerBin,
  ARIA_STUB_PID_DIR: pidDir,
};

let t: TestApp;
let baseUrl: string;
let apiKey: string;
let userId: string;
const supervisors: Supervisor[] = [];

/** A supervisor of its own (fast timings, its own ENGINES and stub switches) on the app's registry and router. */
function supervisor(engines: string, env: Record<string, string> = {}, timings: Partial<Timings> = {}): Supervisor {
  const config = { ...t.ctx.config, engines, runtime: loadConfig({ ...runtimeEnv, ...env }).runtime };
  const s = createSupervisor({ ...t.ctx, config }, { registry: t.services.registry, router: t.services.router }, { timings: { ...FAST, ...timings } });
  supervisors.push(s);
  return s;
}

async function chat(model: string, content: string) {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }] }),
  });
  return { status: res.status, cost: res.headers.get('x-cost'), body: (await res.json()) as any };
}

beforeAll(async () => {
  // The app's own supervisor runs ENGINES=echo:int4 with the default timings (the `cpd serve` path).
  t = await createTestApp('postgres', { ENGINES: 'echo:int4', RATE_LIMITS: 'gateway=100000/1s', ...runtimeEnv });
  t.app.listen({ hostname: '127.0.0.1', port: 0 });
  baseUrl = `http://127.0.0.1:${t.app.server!.port}`;
  const good = makeBundle(work, { model: 'echo' });
  for (const slug of ['echo', 'echo-crash', 'echo-loop', 'echo-stop', 'echo-gpu', 'echo-hang'])
    await publishArtifact(t.ctx, t.services.store, { path: good, slug, quant: 'int4', sdk: 'v1.0' });
  // Its own bytes: the test corrupts them in storage (objects may be shared by content).
  await publishArtifact(t.ctx, t.services.store, { path: makeBundle(work), slug: 'echo-corrupt', quant: 'int4', sdk: 'v1.0' });
  await publishArtifact(t.ctx, t.services.store, { path: makeBundle(work, { broken: 'no-weights' }), slug: 'broken', quant: 'int4', sdk: 'v1.0' });
  // A reload joins a catalog read already in flight (started by an earlier publish's notice): poll.
  await waitFor(async () => {
    await t.services.registry.reload();
    return ['echo', 'echo-crash', 'echo-loop', 'echo-stop', 'echo-gpu', 'echo-hang', 'echo-corrupt', 'broken'].every((slug) => t.services.registry.artifactsOf(slug).length === 1);
  }, 'the registry to list the published bundles');
  await t.services.pricing.setModelPrices(
    ['echo', 'echo-crash', 'routed-a'].map((slug) => ({ slug, unit: 'per_million_tokens' as const, price: 2 })),
  );
  const user = await makeUser(t);
  userId = user.id;
  apiKey = (await makeApiKey(t, user.id)).key;
  await t.services.billing.credit(t.ctx.database.db, { userId, type: 'adjustment', amountMicros: 10_000_000n, reference: `fund-${userId}`, description: 'test funds' });
});

afterAll(async () => {
  await Promise.all(supervisors.map((s) => s.stop()));
  await t.app.stop(true);
  await t.close(); // runs the app supervisor's stop
  expect(livePids(pidDir)).toEqual([]);
  rmSync(work, { recursive: true, force: true });
  rmSync(pidDir, { recursive: true, force: true });
});

describe('runtime supervisor', () => {
  test('end to end: a gateway request is served by a supervised engine and billed', async () => {
    const runtime = t.services.runtime;
    expect(runtime.configured()).toBe(true);
    void runtime.start();
    await waitFor(() => runtime.status()[0]?.state === 'ready', 'the app engine to be ready');
    const [engine] = runtime.status();
    expect(engine).toMatchObject({ kind: 'engine', model: 'echo', restarts: 0, last_error: null });
    expect(engine!.pid).toBeGreaterThan(0);
    expect(livePids(pidDir)).toContain(engine!.pid!);
    // The bundle was copied from the registry and verified.
    expect(existsSync(join(t.dataDir, 'bundles', 'echo-int4-v1.0', 'weight.bin'))).toBe(true);

    const before = await t.services.billing.getBalanceMicros(userId);
    const res = await chat('echo', 'hello engine');
    expect(res.status).toBe(200);
    expect(res.body.choices[0].message.content).toBe('echo: hello engine');
    expect(Number(res.cost)).toBeGreaterThan(0);
    await t.services.router.flushUsage();
    // 2 prompt + 3 completion tokens at 2 per million tokens = 10 micro-units.
    expect(before - (await t.services.billing.getBalanceMicros(userId))).toBe(10n);

    // Streaming through the gateway: SSE frames from the engine, ending in [DONE].
    const stream = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'streamed words' }] }),
    });
    expect(stream.status).toBe(200);
    const sse = await stream.text();
    const deltas = sse
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? '')
      .join('');
    expect(deltas).toBe('echo: streamed words');
    expect(sse.trimEnd().endsWith('data: [DONE]')).toBe(true);

    // Embeddings: the engine serves them too (float vectors; 2 + 1 words at 2 per million tokens = 6 micro-units).
    await t.services.router.flushUsage();
    const balance = await t.services.billing.getBalanceMicros(userId);
    const embedded = await fetch(`${baseUrl}/v1/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', input: ['hello engine', 'x'] }),
    });
    expect(embedded.status).toBe(200);
    const vectors = (await embedded.json()) as { data: Array<{ embedding: number[] }>; usage: { prompt_tokens: number } };
    expect(vectors.data.map((d) => d.embedding)).toEqual([
      [0, 2, 12],
      [1, 1, 1],
    ]);
    expect(vectors.usage.prompt_tokens).toBe(3);
    await t.services.router.flushUsage();
    expect(balance - (await t.services.billing.getBalanceMicros(userId))).toBe(6n);
    // The process state is a metric too.
    const metrics = await scrape(`${baseUrl}/metrics`);
    expect(metrics.value('cpd_runtime_engine_state', { name: engine!.name, state: 'ready' })).toBe(1);
    expect(metrics.value('cpd_runtime_engine_state', { name: engine!.name, state: 'backoff' })).toBe(0);

    // Visible to admins, and in the state file `cpd engine status` reads.
    const admin = await makeUser(t, { admin: true });
    const listed = await t.request('GET', '/api/admin/runtimes', { token: admin.token });
    expect(listed.status).toBe(200);
    expect(listed.body.processes[0]).toMatchObject({ model: 'echo', state: 'ready', pid: engine!.pid, port: engine!.port });
    expect((await t.request('GET', '/api/admin/runtimes', { token: (await makeUser(t)).token })).status).toBe(403);
    const state = JSON.parse(readFileSync(join(t.dataDir, 'runtimes', 'state.json'), 'utf8'));
    expect(state.processes[0]).toMatchObject({ model: 'echo', state: 'ready', pid: engine!.pid });
    expect(readFileSync(join(t.dataDir, 'logs', `${engine!.name}.log`), 'utf8')).toContain('starting:');
  });

  test('a bad bundle is refused through the FFI library and never started', async () => {
    const s = supervisor('broken:int4');
    await s.start();
    const [entry] = s.status();
    expect(entry).toMatchObject({ state: 'failed', pid: null, restarts: 0 });
    expect(entry!.last_error).toMatch(/^broken:int4: bundle .* refused: invalid bundle .*weight\.bin is missing$/);
  });

  test('a bundle whose stored bytes do not match their SHA-256 is refused and not kept', async () => {
    const [artifact] = t.services.registry.artifactsOf('echo-corrupt');
    const weight = artifact!.files.find((f) => f.path === 'weight.bin')!;
    writeFileSync(join(t.dataDir, 'objects', 'data', weight.objectKey), new Uint8Array(weight.size));
    const s = supervisor('echo-corrupt:int4');
    await s.start();
    expect(s.status()[0]).toMatchObject({ state: 'failed', pid: null });
    expect(s.status()[0]!.last_error).toMatch(/^echo-corrupt:int4: bundle file weight\.bin of echo-corrupt: SHA-256 [0-9a-f]{64} does not match [0-9a-f]{64}$/);
    expect(readdirSync(join(t.dataDir, 'bundles')).filter((n) => n.startsWith('echo-corrupt'))).toEqual([]);
  });

  test('a crashed engine is restarted and traffic through the gateway recovers', async () => {
    const s = supervisor('echo-crash:int4', { ARIA_STUB_CRASH_AFTER: '2' });
    void s.start();
    await waitFor(() => s.status()[0]?.state === 'ready', 'engine ready');
    const firstPid = s.status()[0]!.pid;
    expect((await chat('echo-crash', 'one')).status).toBe(200);
    expect((await chat('echo-crash', 'two')).status).toBe(200); // the engine exits right after this one
    await waitFor(() => s.status()[0]!.restarts === 1 && s.status()[0]!.state === 'ready', 'restart');
    const after = s.status()[0]!;
    expect(after.pid).not.toBe(firstPid);
    expect(after.last_exit).toMatchObject({ code: 3, signal: null });
    expect(after.last_error).toBe('exited with code 3');
    const res = await chat('echo-crash', 'three');
    expect(res.status).toBe(200);
    expect(res.body.choices[0].message.content).toBe('echo: three');
  });

  test('a crash loop ends in failed, with the reason visible', async () => {
    const s = supervisor('echo-loop:int4', { ARIA_STUB_EXIT_AT_START: '4' });
    void s.start();
    await waitFor(() => s.status()[0]?.state === 'failed', 'crash loop detection');
    const [entry] = s.status();
    expect(entry!.restarts).toBe(2); // three quick exits: the first start and two restarts
    expect(entry!.last_exit?.code).toBe(4);
    expect(entry!.last_error).toMatch(/^crash loop: 3 exits within 20000 ms of starting; retrying in 600000 ms; last: exited with code 4: .*ARIA_STUB_EXIT_AT_START/);
  });

  test('stop sends SIGTERM, then SIGKILL after the deadline, and no process survives', async () => {
    const polite = supervisor('echo-stop:int4');
    const stubborn = supervisor('echo-stop:int4', { ARIA_STUB_IGNORE_SIGTERM: '1' }, { stopDeadlineMs: 300 });
    void polite.start();
    void stubborn.start();
    await waitFor(() => [polite, stubborn].every((s) => s.status()[0]?.state === 'ready'), 'both engines ready');
    const pids = [polite, stubborn].map((s) => s.status()[0]!.pid!);
    expect(livePids(pidDir)).toEqual(expect.arrayContaining(pids));
    await Promise.all([polite.stop(), stubborn.stop()]);
    for (const pid of pids) expect(livePids(pidDir)).not.toContain(pid);
    expect(polite.status()[0]).toMatchObject({ state: 'stopped', pid: null });
    const log = readFileSync(join(t.dataDir, 'logs', `${stubborn.status()[0]!.name}.log`), 'utf8');
    expect(log).toContain('did not stop within 300 ms: SIGKILL');
  });

  test('an engine with @gpu gets CUDA_VISIBLE_DEVICES and --compute cuda', async () => {
    const s = supervisor('echo-gpu:int4@1+2');
    void s.start();
    await waitFor(() => s.status()[0]?.state === 'ready', 'gpu engine ready');
    const { pid, gpu } = s.status()[0]!;
    expect(gpu).toBe('1,2');
    const seen = JSON.parse(readFileSync(join(pidDir, String(pid)), 'utf8'));
    expect(seen).toMatchObject({ mode: 'aria-engine', cuda: '1,2' });
    expect(seen.argv.slice(-2)).toEqual(['--compute', 'cuda']);
    // The server's secrets stay out of the engine's environment.
    expect(seen.secret).toBe(false);
    await s.stop();
  });

  test('an engine that never answers /v1/models is killed after the readiness deadline and retried', async () => {
    const s = supervisor('echo-hang:int4', { ARIA_STUB_HANG: '1' }, { readyTimeoutMs: 300 });
    void s.start();
    await waitFor(() => s.status()[0]!.restarts >= 1, 'a retry after the readiness timeout');
    expect(s.status()[0]!.last_error).toMatch(/^not ready within 300 ms \(GET \/v1\/models\); killed by SIG(KILL|9)/);
    await s.stop();
  });

  test('a supervised aria router: its models, read through the router FFI library, become backends', async () => {
    const s = supervisor('', { ARIA_ROUTER: 'supervise', ARIA_STUB_ROUTER_MODELS: 'routed-a,routed-b' });
    expect(s.configured()).toBe(true);
    void s.start();
    await waitFor(() => s.status()[0]?.state === 'ready', 'router ready');
    const { port } = s.status()[0]!;
    const routed = t.services.router.listBackends().filter((b) => b.model.startsWith('routed-'));
    expect(routed.every((b) => b.source === 'engine')).toBe(true);
    expect(routed.map((b) => [b.model, b.url])).toEqual([
      ['routed-a', `http://127.0.0.1:${port}/v1`],
      ['routed-b', `http://127.0.0.1:${port}/v1`],
    ]);
    const res = await chat('routed-a', 'via router');
    expect(res.status).toBe(200);
    expect(res.body.choices[0].message.content).toBe('echo: via router');
    await s.stop();
    expect(t.services.router.listBackends().filter((b) => b.model.startsWith('routed-'))).toEqual([]);
  });
});

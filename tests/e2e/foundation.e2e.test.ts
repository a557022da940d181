/**
 * The compiled binary, copied alone into an empty directory (no node_modules, no sources), run as
 * an operator would: once on the embedded database and once on PostgreSQL (through a TCP proxy
 * that can make the database unreachable).
 */
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { embeddedMigrations } from '../../src/platform/db/migrations.generated';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from '../support/binary';
import { createEmptyPostgresDatabase } from '../support/db';
import { startPostgresProxy, type TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait';

let dir: string;
let cpd: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cpd-foundation-'));
  cpd = join(dir, 'cpd');
  copyFileSync(await ensureBuilt(), cpd);
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the copied binary to completion in its own empty working directory. */
async function run(args: string[], env: Record<string, string> = {}) {
  const cwd = mkdtempSync(join(tmpdir(), 'cpd-run-'));
  try {
    const proc = Bun.spawn([cpd, ...args], { cwd, env: { ...baseEnv(), ...env }, stdout: 'pipe', stderr: 'pipe' });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { stdout, stderr, code };
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

async function get(base: string, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(base + path, { headers, signal: AbortSignal.timeout(20_000) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text.startsWith('{') ? JSON.parse(text) : null };
}

/** GETs `path` until it answers `want` and returns that answer. */
const pollStatus = (base: string, path: string, want: number) =>
  waitFor(() => get(base, path), `${path} to answer ${want}`, { until: (res) => res.status === want });

/** A raw HTTP/1.1 connection: `send` writes bytes, `received` is what came back so far, `response` resolves it all once the server closes. */
async function rawConnection(base: string) {
  const { hostname, port } = new URL(base);
  const socket = connect(Number(port), hostname);
  let received = '';
  socket.on('data', (d) => {
    received += d;
  });
  const response = new Promise<string>((resolve) => socket.on('close', () => resolve(received)));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return { send: (text: string) => socket.write(text), received: () => received, response };
}

const postHead = (path: string, length: number, extra = '') =>
  `POST ${path} HTTP/1.1\r\nHost: cpd\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n${extra}\r\n`;


/** Resolves true when a TCP connection to `base` is refused, false when it is accepted (then closed). */
function connectionRefused(base: string): Promise<boolean> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

const waitForLog = (server: RunningBinary, text: string) => waitFor(() => server.logs().includes(text), `"${text}" in the logs`);

describe('cpd command line', () => {
  test('every command answers --help with exit 0', async () => {
    const commands = [[], ['serve'], ['migrate'], ['version'], ['users', 'create'], ['models', 'publish'], ['engine', 'install'], ['engine', 'status']];
    for (const args of commands.map((c) => [...c, '--help'])) {
      const r = await run(args);
      expect({ args, code: r.code }).toEqual({ args, code: 0 });
      expect(r.stdout).toStartWith('Usage:');
    }
  });

  test('version prints the version, the commit and the target', async () => {
    const r = await run(['version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(new RegExp(`^cpd \\d+\\.\\d+\\.\\d+ \\(commit [0-9a-f]{12}, ${process.platform}-${process.arch}\\)$`));
  });

  test('a bad PORT stops start-up with exit 2 and one line naming PORT', async () => {
    const r = await run(['serve'], { PORT: 'abc' });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('PORT');
  });

  test('an unknown option is a usage error (exit 2)', async () => {
    const r = await run(['serve', '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--bogus');
  });

  test('several `cpd migrate` at once on a fresh database apply each migration exactly once', async () => {
    const db = await createEmptyPostgresDatabase();
    try {
      const results = await Promise.all([1, 2, 3, 4].map(() => run(['migrate'], { DATABASE_URL: db.url })));
      for (const r of results) expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      const appliedCounts = results.map((r) => Number(/applied (\d+) migration/.exec(r.stdout)?.[1] ?? 0));
      expect(appliedCounts.reduce((a, b) => a + b, 0)).toBe(embeddedMigrations.length);
      expect(results.filter((r) => r.stdout.includes('database is up to date'))).toHaveLength(3);

      const sql = postgres(db.url, { max: 1, onnotice: () => {} });
      const rows = await sql<{ name: string }[]>`select name from cpd_migrations order by name`;
      await sql.end();
      expect(rows.map((r) => r.name)).toEqual(embeddedMigrations.map((m) => m.name).sort());
    } finally {
      await db.drop();
    }
  }, 60_000);
});

/** What both database modes must do; `server()` is the running binary. */
function contractTests(server: () => RunningBinary) {
  test('/healthz answers 200 {"status":"ok"} with X-Request-Id', async () => {
    const res = await get(server().url, '/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
    expect(res.headers.get('x-request-id')).toBeTruthy();
  });

  test('an unknown route is a JSON 404 {error}', async () => {
    const res = await get(server().url, '/api/no-such-thing');
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.body).toEqual({ error: expect.any(String) });
    expect(res.headers.get('x-request-id')).toBeTruthy();
  });

  test('a body that fails its schema is a 400 {error}', async () => {
    const res = await fetch(`${server().url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 42 }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: expect.any(String) });
  });

  test('a body over the limit is a JSON 413, not Bun\'s bare one', async () => {
    const conn = await rawConnection(server().url);
    conn.send(`${postHead('/api/auth/register', 100_000_000)}{}`);
    const response = await conn.response;
    expect(response).toStartWith('HTTP/1.1 413');
    expect(response.toLowerCase()).toContain('x-request-id:');
    expect(JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4))).toEqual({ error: expect.any(String) });
  });

  test('/api/docs serves the UI and /api/docs/json is a valid OpenAPI 3.1 document', async () => {
    const ui = await fetch(`${server().url}/api/docs`);
    expect(ui.status).toBe(200);
    expect(ui.headers.get('content-type')).toContain('text/html');
    await ui.text();
    const doc = (await get(server().url, '/api/docs/json')).body;
    expect(doc.openapi).toStartWith('3.1');
    await SwaggerParser.validate(structuredClone(doc));
  });

  test('access lines carry method, path without query, status, duration, request id, and no secrets', async () => {
    const password = 'pw-Very-Secret-0451';
    const reg = await fetch(`${server().url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: `log-${Date.now()}@example.com`, password }),
    });
    expect(reg.status).toBe(201);
    const { token } = (await reg.json()) as { token: string };
    await get(server().url, `/api/auth/me?token=${token}&limit=5`, { authorization: `Bearer ${token}`, cookie: `cpd_session=${token}` });
    const requestId = 'e2e-log-check-1';
    await get(server().url, '/healthz?probe=Q7f3-query-value', { 'x-request-id': requestId });

    await waitForLog(server(), `"request_id":"${requestId}"`);
    const line = server()
      .logs()
      .split('\n')
      .find((l) => l.includes(`"request_id":"${requestId}"`));
    expect(JSON.parse(line!)).toMatchObject({ msg: 'request', method: 'GET', path: '/healthz', status: 200, duration_ms: expect.any(Number) });
    const logs = server().logs();
    expect(logs).toContain('"path":"/api/auth/me"');
    for (const secret of [password, token, 'Q7f3-query-value']) expect(logs).not.toContain(secret);
  });
}

/** Last test of each mode: SIGTERM while a request is in flight. */
function shutdownTest(server: () => RunningBinary) {
  test('SIGTERM lets an in-flight request finish, refuses new connections, and exits 0', async () => {
    const s = server();
    const body = JSON.stringify({ email: `inflight-${Date.now()}@example.com`, password: 'pw-in-flight-123' });
    // The headers now, the body after SIGTERM. "100 Continue" says the handler is waiting for the
    // body: from then on the request is in flight.
    const conn = await rawConnection(s.url);
    conn.send(postHead('/api/auth/register', Buffer.byteLength(body), 'Expect: 100-continue\r\n'));
    await waitFor(() => conn.received().startsWith('HTTP/1.1 100 Continue'), '100 Continue');
    s.proc.kill('SIGTERM');
    await waitForLog(s, '"msg":"shutting down"');
    // A new connection is refused (not fetch: it could reuse a pooled keep-alive connection).
    expect(await connectionRefused(s.url)).toBe(true);

    conn.send(body);
    const response = (await conn.response).replace('HTTP/1.1 100 Continue\r\n\r\n', '');
    expect(response).toStartWith('HTTP/1.1 201');
    expect(response).toContain('"token"');
    expect(await s.stop()).toBe(0);
    expect(s.logs()).toContain('"msg":"stopped"');
    expect(s.logs()).toContain('"method":"POST","path":"/api/auth/register","status":201');
  }, 60_000);
}

describe('cpd serve on the embedded database (empty directory)', () => {
  let server: RunningBinary;
  beforeAll(async () => {
    server = await startBinary({ binary: cpd, cwd: dir });
  }, 90_000);
  afterAll(() => server?.stop());

  test('creates its database under ./data and nothing else appears beside the binary', () => {
    expect(readdirSync(dir).sort()).toEqual(['cpd', 'data']);
    expect(readdirSync(join(dir, 'data'))).toContain('pg');
  });

  contractTests(() => server);

  test('a second process on the same embedded database is refused with one line, exit 2', async () => {
    const proc = Bun.spawn([cpd, 'migrate'], { cwd: dir, env: baseEnv(), stdout: 'pipe', stderr: 'pipe' });
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(2);
    expect(stderr.trimEnd().split('\n')).toEqual([expect.stringContaining('is in use by another cpd process')]);
    expect((await get(server.url, '/healthz')).status).toBe(200);
  });

  shutdownTest(() => server);

  test('reopens the same embedded database after a restart', async () => {
    const again = await startBinary({ binary: cpd, cwd: dir });
    try {
      expect((await get(again.url, '/healthz')).status).toBe(200);
      expect(again.logs()).not.toContain('migrations applied');
    } finally {
      expect(await again.stop()).toBe(0);
    }
  }, 90_000);
});

describe('cpd serve on PostgreSQL (through a proxy that can cut the database off)', () => {
  let server: RunningBinary;
  let proxy: TcpProxy;
  let db: Awaited<ReturnType<typeof createEmptyPostgresDatabase>>;
  beforeAll(async () => {
    db = await createEmptyPostgresDatabase();
    const linked = await startPostgresProxy(db.url);
    proxy = linked.proxy;
    server = await startBinary({ binary: cpd, env: { DATABASE_URL: linked.url } });
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    await proxy?.close();
    await db?.drop();
  });

  test('applies the migrations on first start', () => {
    expect(server.logs()).toContain('"msg":"migrations applied"');
  });

  contractTests(() => server);

  test('/healthz is 503 {"error":"database unavailable"} while the database is cut off, 200 again once it is back', async () => {
    proxy.cut();
    const down = await pollStatus(server.url, '/healthz', 503);
    expect(down.status).toBe(503);
    expect(down.body).toEqual({ error: 'database unavailable' });
    proxy.restore();
    expect((await pollStatus(server.url, '/healthz', 200)).body).toEqual({ status: 'ok' });
  }, 60_000);

  test('/healthz answers 503 instead of hanging when the database stops responding', async () => {
    proxy.stall();
    const res = await get(server.url, '/healthz');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: 'database unavailable' });
    proxy.restore();
    expect((await pollStatus(server.url, '/healthz', 200)).status).toBe(200);
  }, 60_000);

  shutdownTest(() => server);
});

/**
 * The error contract and the access log, on a small Elysia app built from the real platform
 * plugins (the same ones app.ts mounts) with routes that fail in every way a module can.
 */
import { describe, expect, test } from 'bun:test';
import { Elysia, t } from 'elysia';
import { AppError } from '../../src/platform/errors';
import { errorPlugin, MAX_REQUEST_BODY_BYTES } from '../../src/platform/http/errors';
import { requestLogPlugin } from '../../src/platform/http/request-log';
import { expectErrorShape } from '../support/error-shape';
import { captureLogger } from '../support/log-sink';
import { waitFor } from '../support/wait';

function build() {
  const { log, lines } = captureLogger();
  const app = new Elysia()
    .use(requestLogPlugin(log))
    .use(errorPlugin(log))
    .get('/ok', () => ({ ok: true }))
    .get('/redirect', () => new Response(null, { status: 302, headers: { location: '/ok' } }))
    .get('/own-id', () => new Response('mine', { headers: { 'x-request-id': 'set-by-handler' } }))
    .get('/stream', () => new Response(new Blob(['a']).stream()))
    .get('/conflict', () => {
      throw new AppError('conflict', 'email already registered');
    })
    .get('/limited', () => {
      throw new AppError('rate_limited', 'slow down', { 'retry-after': '7' });
    })
    .get('/crash', () => {
      throw new Error('secret internals: /srv/cpd/db password=hunter2');
    })
    .get('/unique', () => {
      throw Object.assign(new Error('duplicate key value violates unique constraint "users_email"'), { code: '23505' });
    })
    .get('/deadlock', () => {
      throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
    })
    .get('/items', ({ query }) => query, { query: t.Object({ limit: t.Optional(t.Numeric({ minimum: 1, maximum: 200 })) }) })
    .post('/things', ({ body }) => body, { body: t.Object({ name: t.String({ minLength: 1 }) }) })
    .post('/raw', async ({ request }) => ({ bytes: (await request.arrayBuffer()).byteLength }), { parse: 'none' });

  async function call(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
    const res = await app.handle(new Request(`http://localhost${path}`, { method, body: init.body, headers: init.headers }));
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: JSON.parse(text) };
  }
  /** The parsed access lines, once `count` of them exist (after-response hooks run asynchronously). */
  function accessLines(count: number) {
    const access = () => lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    return waitFor(access, `${count} access lines`, { until: (a) => a.length >= count });
  }
  return { app, call, lines, accessLines };
}

describe('error contract', () => {
  const { app, call, lines } = build();

  const cases: Array<[string, string, number, string | RegExp, { body?: string; headers?: Record<string, string> }?]> = [
    ['unknown route', '/nowhere', 404, 'not found'],
    ['AppError kind', '/conflict', 409, 'email already registered'],
    ['unique violation', '/unique', 409, 'already exists'],
    ['a transaction PostgreSQL aborted for a concurrent one (deadlock)', '/deadlock', 503, /retry it$/],
    ['query failing its schema', '/items?limit=0', 400, /^invalid /],
    ['query of the wrong type', '/items?limit=many', 400, /^invalid /],
    ['unexpected exception', '/crash', 500, 'internal server error'],
  ];
  for (const [what, path, status, error] of cases) {
    test(`${what}: ${status} {"error"} as JSON with X-Request-Id`, async () => {
      expectErrorShape(await call('GET', path), status, error);
    });
  }

  test('a transaction aborted for a concurrent one says when to retry', async () => {
    expect((await call('GET', '/deadlock')).headers.get('retry-after')).toBe('1');
  });

  test('a body failing its schema is 400, never Elysia 422', async () => {
    const res = await call('POST', '/things', { body: JSON.stringify({ name: '' }), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toContain('name');
  });

  test('malformed JSON is 400', async () => {
    const res = await call('POST', '/things', { body: '{"name":', headers: { 'content-type': 'application/json' } });
    expect(res).toMatchObject({ status: 400, body: { error: 'request body is not valid JSON' } });
  });

  test('a 500 reveals nothing and the cause is logged', async () => {
    const res = await call('GET', '/crash');
    expect(res.text).not.toContain('hunter2');
    expect(res.text).not.toContain('internals');
    expect(lines.some((l) => l.includes('"msg":"unhandled error"'))).toBe(true);
  });

  test('a declared body over the limit is a JSON 413 before anything reads it', async () => {
    const res = await call('POST', '/things', { headers: { 'content-type': 'application/json', 'content-length': String(MAX_REQUEST_BODY_BYTES + 1) } });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: expect.stringContaining('larger than') });
    expect(res.headers.get('x-request-id')).toBeTruthy();
  });

  // What the server holds meanwhile is measured on the binary (tests/e2e/hardening.binary.test.ts).
  test('a body without a declared length is a JSON 413 once it passes the limit while read', async () => {
    let sent = 0;
    const chunk = new Uint8Array(1024 * 1024).fill(32);
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > MAX_REQUEST_BODY_BYTES * 2) return controller.close();
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const res = await app.handle(
      new Request('http://localhost/things', { method: 'POST', body, headers: { 'content-type': 'application/json' }, duplex: 'half' } as RequestInit),
    );
    expectErrorShape({ status: res.status, headers: res.headers, text: await res.text() }, 413, `request body is larger than ${MAX_REQUEST_BODY_BYTES} bytes`);
  });

  test('a client that leaves while sending its body: 499 in the access log, no error line, whoever reads the body', async () => {
    for (const path of ['/things', '/raw']) {
      const before = lines.length;
      // What Bun does when the connection closes mid-body: the request's signal aborts and the
      // body's read fails with an AbortError.
      const client = new AbortController();
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"name":'));
          client.signal.addEventListener('abort', () => controller.error(new DOMException('The connection was closed.', 'AbortError')));
        },
      });
      const answered = app.handle(
        new Request(`http://localhost${path}`, { method: 'POST', body, signal: client.signal, headers: { 'content-type': 'application/json' }, duplex: 'half' } as RequestInit),
      );
      client.abort();
      const res = await answered;
      expect(res.status).toBe(499);
      const id = res.headers.get('x-request-id');
      const mine = () => lines.slice(before).map((l) => JSON.parse(l) as { level: string; msg: string; status?: number; request_id?: string }).filter((l) => l.request_id === id);
      const logged = await waitFor(mine, `the access line of ${path}`, { until: (ls) => ls.some((l) => l.msg === 'request'), timeoutMs: 2_000 });
      expect(logged.map((l) => [l.level, l.msg, l.status])).toEqual([['info', 'request', 499]]);
    }
  });

  test('an AppError keeps its headers (429 Retry-After)', async () => {
    const res = await call('GET', '/limited');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
  });

  test('a Response a handler returns carries X-Request-Id unchanged otherwise; its own id wins', async () => {
    const send = (path: string, id: string) => app.handle(new Request(`http://localhost${path}`, { headers: { 'x-request-id': id } }));
    const redirect = await send('/redirect', 'r-302');
    expect([redirect.status, redirect.headers.get('location'), redirect.headers.get('x-request-id')]).toEqual([302, '/ok', 'r-302']);
    const stream = await send('/stream', 'r-stream');
    expect([stream.status, await stream.text(), stream.headers.get('x-request-id')]).toEqual([200, 'a', 'r-stream']);
    expect((await send('/own-id', 'r-own')).headers.get('x-request-id')).toBe('set-by-handler');
    // The context's copy is gone after the first such Response; the next request still gets its own.
    expect((await send('/ok', 'r-next')).headers.get('x-request-id')).toBe('r-next');
  });

  test('a well-formed incoming X-Request-Id is kept, a malformed one replaced', async () => {
    expect((await call('GET', '/ok', { headers: { 'x-request-id': 'trace-42.a' } })).headers.get('x-request-id')).toBe('trace-42.a');
    const replaced = (await call('GET', '/ok', { headers: { 'x-request-id': 'bad id\twith spaces' } })).headers.get('x-request-id');
    expect(replaced).toMatch(/^[A-Za-z0-9]{20}$/);
  });
});

describe('access log', () => {
  test('one line per request: method, path without query, status, duration, request id', async () => {
    const { call, accessLines } = build();
    await call('GET', '/ok?token=abc123secret&limit=5', { headers: { 'x-request-id': 'req-1' } });
    await call('GET', '/nowhere?x=1', { headers: { 'x-request-id': 'req-2' } });
    await call('GET', '/crash', { headers: { 'x-request-id': 'req-3' } });
    const access = await accessLines(3);
    expect(access).toHaveLength(3);
    expect(access[0]).toMatchObject({ level: 'info', method: 'GET', path: '/ok', status: 200, request_id: 'req-1' });
    expect(access[0].duration_ms).toBeGreaterThanOrEqual(0);
    expect(access[1]).toMatchObject({ path: '/nowhere', status: 404, request_id: 'req-2' });
    expect(access[2]).toMatchObject({ path: '/crash', status: 500, request_id: 'req-3' });
  });

  test('a body without a declared length (chunked) keeps the line its request id and duration', async () => {
    const { app, accessLines } = build();
    // Such a body is swapped for a counting one before anything reads it (the body limit).
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"name":"x"}'));
        controller.close();
      },
    });
    const res = await app.handle(
      new Request('http://localhost/things', { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-request-id': 'req-chunked' }, duplex: 'half' } as RequestInit),
    );
    expect(res.status).toBe(200);
    const [line] = await accessLines(1);
    expect(line).toMatchObject({ path: '/things', status: 200, request_id: 'req-chunked' });
    expect(line.duration_ms).toBeGreaterThanOrEqual(0);
  });

  test('never writes Authorization, cookies, query tokens or body passwords', async () => {
    const { call, lines, accessLines } = build();
    const secrets = ['Bearer-sekrit-token-1', 'cookie-sekrit-2', 'query-sekrit-3', 'body-sekrit-password-4'];
    await call('POST', `/things?token=${secrets[2]}`, {
      body: JSON.stringify({ name: 'x', password: secrets[3] }),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secrets[0]}`, cookie: `cpd_session=${secrets[1]}` },
    });
    await call('POST', `/things?token=${secrets[2]}`, {
      body: JSON.stringify({ password: secrets[3] }),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secrets[0]}`, cookie: `cpd_session=${secrets[1]}` },
    });
    await accessLines(2);
    const all = lines.join('');
    for (const secret of secrets) expect(all).not.toContain(secret);
  });
});

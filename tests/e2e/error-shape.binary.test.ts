/**
 * The error contract on dist/cpd as a process, with the checks the in-process run uses
 * (tests/support/error-shape.ts): every refusal the real routes make is JSON {"error": string}
 * with an X-Request-Id, never Elysia's 422 or a plain-text 404.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect } from 'node:net';
import { type RunningBinary, startBinary } from '../support/binary';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { expectErrorShape } from '../support/error-shape';

const MAX_REQUEST_BODY_BYTES = 64 * 1024 * 1024;

let db: TestDatabase;
let cpd: RunningBinary;
let token: string;

async function call(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
  const res = await fetch(cpd.url + path, { method, body: init.body, headers: init.headers });
  return { status: res.status, headers: res.headers, text: await res.text() };
}
const jsonBody = (body: unknown) => ({ body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

/** The raw answer to a request head sent alone (a body that never comes). */
async function rawHead(head: string): Promise<string> {
  const { hostname, port } = new URL(cpd.url);
  const socket = connect(Number(port), hostname);
  let received = '';
  socket.on('data', (d) => {
    received += d;
  });
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(head);
  await new Promise<void>((resolve) => {
    const check = () => /\r\n\r\n[\s\S]*\}$/.test(received) && resolve();
    socket.on('data', check);
    socket.once('close', () => resolve());
  });
  socket.destroy();
  return received;
}

beforeAll(async () => {
  db = await createTestDatabase('postgres');
  cpd = await startBinary({ env: { DATABASE_URL: db.url!, SECRET_KEY: 'e'.repeat(40) } });
  const res = await call('POST', '/api/auth/register', jsonBody({ email: 'shape@example.com', password: 'correct horse battery' }));
  expect(res.status, res.text).toBe(201);
  token = JSON.parse(res.text).token;
}, 120_000);

afterAll(async () => {
  expect(await cpd?.stop()).toBe(0);
  await db?.drop();
});

describe('error contract on the binary', () => {
  const auth = () => ({ authorization: `Bearer ${token}` });
  const cases: Array<[string, () => Promise<Awaited<ReturnType<typeof call>>>, number, string | RegExp]> = [
    ['unknown route', () => call('GET', '/nowhere'), 404, 'not found'],
    ['a method the path does not have', () => call('PATCH', '/api/auth/me', { headers: auth() }), 404, 'not found'],
    ['no credential', () => call('GET', '/api/auth/me'), 401, 'missing or invalid credentials'],
    ['not an admin', () => call('GET', '/api/admin/runtimes', { headers: auth() }), 403, 'admin role required'],
    ['query failing its schema', () => call('GET', '/api/billing/transactions?limit=0', { headers: auth() }), 400, /^invalid /],
    ['query of the wrong type', () => call('GET', '/api/billing/transactions?limit=many', { headers: auth() }), 400, /^invalid /],
    ['body failing its schema (never 422)', () => call('POST', '/api/auth/register', jsonBody({ email: '', password: 'correct horse battery' })), 400, /^invalid email/],
    ['malformed JSON', () => call('POST', '/api/auth/login', { body: '{"identifier":', headers: { 'content-type': 'application/json' } }), 400, 'request body is not valid JSON'],
    ['a taken email', () => call('POST', '/api/auth/register', jsonBody({ email: 'shape@example.com', password: 'correct horse battery' })), 409, /already/],
    ['an unimplemented agents path', () => call('GET', '/v1/agents/environments'), 501, 'not implemented'],
  ];
  for (const [what, send, status, error] of cases) {
    test(`${what}: ${status} {"error"} as JSON with X-Request-Id`, async () => {
      expectErrorShape(await send(), status, error);
    });
  }

  test('a declared body over the limit is a JSON 413 before the body is sent', async () => {
    const raw = await rawHead(
      `POST /api/auth/login HTTP/1.1\r\nHost: cpd\r\nContent-Type: application/json\r\nContent-Length: ${MAX_REQUEST_BODY_BYTES + 1}\r\nConnection: close\r\n\r\n`,
    );
    expect(raw).toStartWith('HTTP/1.1 413 ');
    expect(raw).toMatch(/\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
    expect(raw).toMatch(/\r\nx-request-id: [\w.-]+\r\n/i);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toEqual({ error: `request body is larger than ${MAX_REQUEST_BODY_BYTES} bytes` });
  });

  test('a well-formed incoming X-Request-Id is kept, a malformed one replaced', async () => {
    expect((await call('GET', '/nowhere', { headers: { 'x-request-id': 'trace-42.a' } })).headers.get('x-request-id')).toBe('trace-42.a');
    const replaced = (await call('GET', '/nowhere', { headers: { 'x-request-id': 'bad id\twith spaces' } })).headers.get('x-request-id');
    expect(replaced).toMatch(/^[A-Za-z0-9]{20}$/);
  });

  test('nothing above was an unhandled error', () => {
    expect(cpd.logs()).not.toContain('"msg":"unhandled error"');
  });
});

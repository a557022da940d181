/**
 * Strangers' bodies are not read, on dist/cpd as a process: a request without a valid credential
 * to a route that needs one is answered 401 before its body is read, and the answer reaches a
 * client that is still sending. Before, only the gateway's routes refused first: six parallel 60 MB JSON POSTs to
 * /api/api-keys took the server's RSS from 107 to 559 MB before their 401s, and a request that
 * declared 50 MB and sent 1 KB was never answered.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect } from 'node:net';
import { readFileSync } from 'node:fs';
import { type RunningBinary, startBinary } from '../support/binary';
import { sendChunked } from '../support/chunked';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { freePort } from '../support/ports';
import { waitFor } from '../support/wait';

const MB = 1024 * 1024;
const AGENT_KEY = 'agent-cloud-key-0123456789';

let db: TestDatabase;
let cpd: RunningBinary;
let origin: string;
let token: string;

/** The server's resident memory, peak and current, in bytes (Linux /proc). */
function memoryOf(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { peak: kb('VmHWM'), now: kb('VmRSS') };
}

/**
 * A POST declaring `declared` bytes of JSON over a raw socket, of which `send` bytes are sent as
 * fast as the server takes them; then the socket stays open. `answer` fills in as the server
 * answers: its status line's code, and its body once the whole answer has arrived.
 */
function post(path: string, headers: Record<string, string>, declared: number, send: number) {
  const { hostname, port } = new URL(cpd.url);
  const socket = connect(Number(port), hostname);
  const answer = { status: 0, body: '', sentBytes: 0, closed: false };
  let received = '';
  socket.on('data', (d) => {
    received += d.toString('latin1');
    const head = received.indexOf('\r\n\r\n');
    if (head === -1) return;
    answer.status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(received.slice(0, head))?.[1] ?? -1);
    if (received.length - head - 4 >= length) answer.body = received.slice(head + 4, head + 4 + length);
  });
  socket.on('error', () => {}); // EPIPE or a reset once the server stops reading: the answer counts
  socket.on('close', () => {
    answer.closed = true;
  });
  const sending = (async () => {
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const head = Object.entries({ host: 'cpd', 'content-type': 'application/json', 'content-length': String(declared), ...headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`);
    const chunk = Buffer.alloc(256 * 1024, 'a');
    chunk.write('{"name":"');
    while (answer.sentBytes < send && !answer.status && !answer.closed) {
      const piece = chunk.subarray(0, Math.min(chunk.length, send - answer.sentBytes));
      answer.sentBytes += piece.length;
      // Backpressure: wait until the kernel took it, or the server answered or closed.
      if (!socket.write(piece)) await new Promise<void>((resolve) => waitOnce(socket, ['drain', 'data', 'close'], resolve));
    }
  })();
  return { answer, sending, close: () => socket.destroy() };
}

function waitOnce(socket: ReturnType<typeof connect>, events: string[], fn: () => void) {
  const wake = () => {
    for (const event of events) socket.off(event, wake);
    fn();
  };
  for (const event of events) socket.on(event, wake);
}

beforeAll(async () => {
  db = await createTestDatabase('postgres');
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  cpd = await startBinary({ env: { DATABASE_URL: db.url!, PORT: String(port), PUBLIC_URL: origin, AGENT_CLOUD_API_KEY: AGENT_KEY } });
  const res = await fetch(`${cpd.url}/api/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'stranger-bodies@example.com', password: 'correct horse battery' }),
  });
  expect(res.status).toBe(201);
  token = ((await res.json()) as { token: string }).token;
}, 120_000);

afterAll(async () => {
  expect(await cpd?.stop()).toBe(0);
  await db?.drop();
});

describe('a stranger is answered 401 before its body is read', () => {
  test("six parallel 60 MB JSON POSTs to /api/api-keys without a credential: 401 each, and the server's memory stays low", async () => {
    const before = memoryOf(cpd.proc.pid);
    const posts = Array.from({ length: 6 }, () => post('/api/api-keys', {}, 60 * MB, 60 * MB));
    await Promise.all(posts.map((p) => p.sending));
    await waitFor(() => posts.every((p) => p.answer.body !== ''), 'six answers');
    // Before: every body was read and parsed, 107 → 559 MB. Now not even one body's worth.
    expect(memoryOf(cpd.proc.pid).peak - before.now).toBeLessThan(60 * MB);
    for (const p of posts) {
      // Bun drops the rest of the body as it comes (the client may well finish sending): the 401 arrives whole.
      expect({ status: p.answer.status, body: JSON.parse(p.answer.body) }).toEqual({ status: 401, body: { error: 'missing or invalid credentials' } });
      p.close();
    }
  }, 60_000);

  for (const [what, path, headers] of [
    ['a session route', '/api/api-keys', {}],
    ['an admin route', '/api/admin/users/usr_nobody/adjustments', {}],
    ['an agent route (AGENT_CLOUD_API_KEY set)', '/v1/agents', {}],
    ['a gateway route', '/v1/chat/completions', { authorization: 'Bearer bfvk-not-a-key' }],
    ['a session route with an unknown token', '/api/api-keys', { authorization: 'Bearer not-a-session' }],
  ] as const) {
    test(`${what}: 50 MB declared and 1 KB sent is answered 401 without waiting for the rest`, async () => {
      const p = post(path, headers, 50 * MB, 1024);
      try {
        await waitFor(() => p.answer.body, 'the answer while the body is still owed');
        expect(p.answer.status).toBe(401);
        expect(JSON.parse(p.answer.body)).toEqual({ error: expect.any(String) });
      } finally {
        p.close();
      }
    });
  }

  test('a chunked body that never ends is answered 401 too', async () => {
    const res = await sendChunked(cpd.url, '/api/api-keys', { 'content-type': 'application/json' }, 1024, '{"name":"', { open: true });
    expect({ status: res.status, body: JSON.parse(res.body) }).toEqual({ status: 401, body: { error: 'missing or invalid credentials' } });
  });
});

describe('what a credential changes is unchanged', () => {
  test('a valid credential with a body: the body is read (the key gets its name)', async () => {
    const body = JSON.stringify({ name: 'n'.repeat(60) });
    const res = await fetch(`${cpd.url}/api/api-keys`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { name: string }).name).toBe('n'.repeat(60));
  });

  test('a cookie write from this site works; from another site it is 403 as before, and creates nothing', async () => {
    const keys = async () => ((await (await fetch(`${cpd.url}/api/api-keys`, { headers: { authorization: `Bearer ${token}` } })).json()) as unknown[]).length;
    const before = await keys();
    const write = (from: string) =>
      fetch(`${cpd.url}/api/api-keys`, { method: 'POST', headers: { cookie: `cpd_session=${token}`, origin: from, 'content-type': 'application/json' }, body: '{"name":"c"}' });
    const forged = await write('https://evil.example');
    expect({ status: forged.status, body: await forged.json() }).toEqual({
      status: 403,
      body: { error: 'cross-site request refused: requests from https://evil.example are not accepted here' },
    });
    expect(await keys()).toBe(before);
    expect((await write(origin)).status).toBe(201);
    expect(await keys()).toBe(before + 1);
  });

  test('a signed-in user who is not an admin gets 403 on an admin write, whatever the body', async () => {
    const res = await fetch(`${cpd.url}/api/admin/users/usr_nobody/adjustments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': 'k1' },
      body: '{"amount": ',
    });
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 403, body: { error: 'admin role required' } });
  });

  test('nothing above was an unhandled error', () => {
    expect(cpd.logs()).not.toContain('"msg":"unhandled error"');
  });
});

/**
 * A request without a valid credential on a route that needs one is refused before its body is
 * read: every such route of the app, each sent a body that stops after its first kilobyte and
 * never ends (a client still sending, or one that declared far more than it sends). The answer
 * must come anyway, and at most 64 KiB of the body may have been read.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../support/app';
import { makeUser } from '../support/make';
import { waitFor } from '../support/wait';
import { isAnthropicError, speaksAnthropic } from '../support/error-shape';

const AGENT_KEY = 'agent-cloud-key-0123456789';
const DISCARDED_AT_MOST = 64 * 1024;

/** A JSON body: its first kilobyte, then nothing more, ever; counts what the server pulled. */
function stalledBody() {
  const sent = { bytes: 0 };
  let first = true;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (!first) return new Promise<void>(() => {});
      first = false;
      const chunk = new TextEncoder().encode(`{"name":"${'a'.repeat(1014)}`);
      sent.bytes += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
  return { stream, sent };
}

describe('credentials are checked before the body is read', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    t = await createTestApp('postgres', { AGENT_CLOUD_API_KEY: AGENT_KEY });
    user = await makeUser(t);
  });
  afterAll(() => t.close());

  /** Every route that declares credentials and takes a body, with its parameters filled in. */
  const protectedWrites = () =>
    t.app.routes
      .filter((r) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(r.method) && (r.hooks?.detail as Record<string, unknown> | undefined)?.['x-cpd-auth'])
      .map((r) => ({ method: r.method, path: r.path.replace(/:[^/]+/g, 'x1') }));

  const send = (method: string, path: string, headers: Record<string, string> = {}) => {
    const body = stalledBody();
    const answer = { status: 0, text: '' };
    const done = t.app
      .handle(new Request(`http://localhost${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, body: body.stream, duplex: 'half' } as RequestInit))
      .then(async (res) => {
        answer.text = await res.text();
        answer.status = res.status;
      });
    return { answer, sent: body.sent, done };
  };

  test('no credential: every protected route answers 401 {error} while the body is still coming', async () => {
    const routes = protectedWrites();
    // The session, key, admin and agent routes are all among them.
    for (const path of ['/api/api-keys', '/v1/chat/completions', '/api/admin/users/x1/adjustments', '/v1/agents']) expect(routes.map((r) => r.path)).toContain(path);
    const sent = routes.map((r) => ({ ...r, ...send(r.method, r.path) }));
    await waitFor(() => sent.filter((s) => s.answer.status === 0).map((s) => `${s.method} ${s.path}`), 'every route to answer', { until: (waiting) => waiting.length === 0, timeoutMs: 15_000 });
    for (const s of sent) {
      expect({ route: `${s.method} ${s.path}`, status: s.answer.status }).toEqual({ route: `${s.method} ${s.path}`, status: 401 });
      if (speaksAnthropic(s.path)) expect(isAnthropicError(JSON.parse(s.answer.text))).toBe(true);
      else expect(JSON.parse(s.answer.text)).toEqual({ error: expect.any(String) });
      expect(s.sent.bytes).toBeLessThanOrEqual(DISCARDED_AT_MOST);
    }
  });

  test('a credential without the right (not an admin) and a cookie write from another site are 403 before the body too', async () => {
    const forbidden = [
      send('POST', '/api/admin/users/x1/adjustments', { authorization: `Bearer ${user.token}` }),
      send('POST', '/api/api-keys', { cookie: `cpd_session=${user.token}`, origin: 'https://evil.example' }),
    ];
    await waitFor(() => forbidden.every((f) => f.answer.status !== 0), 'both answers', { timeoutMs: 15_000 });
    expect(forbidden.map((f) => f.answer.status)).toEqual([403, 403]);
  });

  test('with a valid credential the body is read as usual', async () => {
    const created = await t.request('POST', '/api/api-keys', { token: user.token, body: { name: 'read' } });
    expect(created.status).toBe(201);
    expect(created.body.name).toBe('read');
  });
});

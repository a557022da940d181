/**
 * The options `cpd serve` listens with (platform/http/listen.ts), on real Bun servers: an error that
 * escapes every handler shows the client nothing of the code, and a port already served refuses a
 * second server. Each is checked against Bun's own behaviour with Elysia's defaults, so the test
 * fails if the option stops mattering the way it is documented.
 */
import { afterEach, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { listenOptions } from '../../src/platform/http/listen';

const servers: Array<ReturnType<typeof Bun.serve>> = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop(true);
});

const SECRET = 'detail-only-the-logs-may-see';
const children: Array<ReturnType<typeof Bun.spawn>> = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill();
});

/** What a browser gets from a server (in a process of its own) whose handler throws `SECRET`. */
async function pageOfThrowingServer(options: Record<string, unknown>): Promise<{ status: number; body: string }> {
  const fixture = join(import.meta.dir, '../fixtures/throwing-server.ts');
  const child = Bun.spawn([process.execPath, fixture, JSON.stringify(options), SECRET], { stdout: 'pipe', stderr: 'ignore' });
  children.push(child);
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  const port = Number(new TextDecoder().decode(value).trim());
  const res = await fetch(`http://127.0.0.1:${port}/`, { headers: { accept: 'text/html' } });
  return { status: res.status, body: await res.text() };
}

describe('listen options', () => {
  test("an error no handler caught is a bare 500: no message, stack or source (Bun's development page shows them)", async () => {
    const development = await pageOfThrowingServer({ hostname: '127.0.0.1', development: true });
    expect(development).toEqual({ status: 500, body: expect.stringContaining(SECRET) }); // what Elysia's default serves
    const ours = await pageOfThrowingServer(listenOptions('127.0.0.1', 0));
    expect(ours.status).toBe(500);
    expect(ours.body).not.toContain(SECRET);
    expect(ours.body).not.toContain('throwing-server.ts');
  });

  test('a port already served refuses a second server (with reusePort both would listen)', () => {
    const first = Bun.serve({ ...listenOptions('127.0.0.1', 0), fetch: () => new Response('first') });
    servers.push(first);
    expect(() => Bun.serve({ ...listenOptions('127.0.0.1', first.port!), fetch: () => new Response('second') })).toThrow();
    // Elysia's default, for contrast: the kernel lets a second SO_REUSEPORT socket in.
    const shared = Bun.serve({ hostname: '127.0.0.1', port: 0, reusePort: true, fetch: () => new Response('a') });
    servers.push(shared);
    const twin = Bun.serve({ hostname: '127.0.0.1', port: shared.port, reusePort: true, fetch: () => new Response('b') });
    servers.push(twin);
    expect(twin.port).toBe(shared.port);
  });
});

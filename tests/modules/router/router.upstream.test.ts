/**
 * A stream's connection to its backend after [DONE]: servers that write each event as it is made
 * send the chunked body's last chunk after the [DONE] event, in a packet of its own. Real sockets:
 * a raw TCP upstream scripts the bytes and counts the connections.
 */
import { afterEach, describe, expect, test } from 'bun:test';
import type { Socket } from 'bun';
import { attemptController, openStreamOnce, type Upstream } from '../../../src/modules/router/router.upstream';
import { type ConnState, rawServer } from '../../support/raw-http-server';
import { waitFor } from '../../support/wait';

const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
const events = (n: number) =>
  `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n` +
  chunk(`data: {"choices":[{"index":0,"delta":{"content":"hi ${n}"}}]}\n\n`) +
  chunk('data: [DONE]\n\n');
const LAST_CHUNK = '0\r\n\r\n';
const timeouts = { connectMs: 5_000, firstByteMs: 5_000 };

const servers: Array<{ stop: () => void }> = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
});

/** Opens a stream and reads it to its end as the router does; the chunks' texts. */
async function readStream(upstream: Upstream): Promise<string[]> {
  const control = attemptController(undefined);
  const { head, rest } = await openStreamOnce(upstream, '{"model":"m","stream":true}', control, timeouts);
  const chunks = [...head];
  for (;;) {
    const { value, done } = await rest.next();
    if (done) break;
    chunks.push(value);
  }
  control.dispose();
  return chunks.map((c) => (c.choices as Array<{ delta: { content: string } }>)[0]!.delta.content);
}

describe('after [DONE]', () => {
  test("the body's last chunk, sent on its own after [DONE], is read: the connection serves the next stream", async () => {
    const sockets: Array<Socket<ConnState>> = [];
    let streams = 0;
    const server = rawServer((_req, socket) => {
      socket.write(events(++streams));
      sockets.push(socket);
    });
    servers.push(server);
    const upstream: Upstream = { url: server.url('/v1').href, apiKey: null, direct: true };

    // The stream ends for the router at [DONE], before the body's end was even sent.
    expect(await readStream(upstream)).toEqual(['hi 1']);
    sockets.shift()!.write(LAST_CHUNK);

    // Streams go on until one is sent on a connection that carried an earlier one. Before, the
    // connection was closed at [DONE] and every stream opened a new one (connections == streams).
    await waitFor(
      async () => {
        expect(await readStream(upstream)).toEqual([`hi ${streams}`]);
        sockets.shift()!.write(LAST_CHUNK);
        return server.opened < streams;
      },
      'a stream on a kept connection',
      { timeoutMs: 3_000 },
    );
    expect(server.requests.length).toBe(streams);
    expect(server.closed).toBe(0);
  });

  test('a body that does not end soon after [DONE], or sends more than its end, is cancelled: its connection is closed', async () => {
    const server = rawServer((_req, socket) => {
      socket.write(events(1)); // and never the last chunk
    });
    servers.push(server);
    const upstream: Upstream = { url: server.url('/v1').href, apiKey: null, direct: true };
    expect(await readStream(upstream)).toEqual(['hi 1']);
    await waitFor(() => server.closed, 'the connection closed by cpd', { timeoutMs: 5_000 });

    const chatty = rawServer((_req, socket) => {
      socket.write(events(1) + chunk(`: ${'x'.repeat(8192)}\n\n`)); // more than an end after [DONE]
    });
    servers.push(chatty);
    expect(await readStream({ url: chatty.url('/v1').href, apiKey: null, direct: true })).toEqual(['hi 1']);
    await waitFor(() => chatty.closed, 'the chatty connection closed by cpd', { timeoutMs: 5_000 });
    expect(chatty.opened).toBe(1);
  });
});

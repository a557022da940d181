/**
 * A TCP server (Bun.listen) that reads HTTP requests framed by content-length and lets each test
 * answer them with exactly the bytes it scripts, counting the connections opened and closed.
 */
import type { Socket } from 'bun';

export interface Received {
  head: string;
  body: Buffer;
  /** Which connection (1-based, in the order they opened) carried it. */
  connection: number;
}

export type Reply = (req: Received, socket: Socket<ConnState>) => void | Promise<void>;

export interface ConnState {
  n: number;
  input: Buffer;
}

/** A TCP server that reads HTTP requests framed by content-length and lets each test answer them. */
export function rawServer(reply: Reply) {
  let opened = 0;
  let closed = 0;
  const requests: Received[] = [];
  const server = Bun.listen<ConnState>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        socket.data = { n: ++opened, input: Buffer.alloc(0) };
      },
      async data(socket, chunk) {
        socket.data.input = Buffer.concat([socket.data.input, chunk]);
        for (;;) {
          const input = socket.data.input;
          const end = input.indexOf('\r\n\r\n');
          if (end < 0) return;
          const head = input.toString('latin1', 0, end);
          const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
          if (input.length < end + 4 + length) return;
          const req = { head, body: input.subarray(end + 4, end + 4 + length), connection: socket.data.n };
          socket.data.input = input.subarray(end + 4 + length);
          requests.push(req);
          await reply(req, socket);
        }
      },
      close() {
        closed++;
      },
    },
  });
  return {
    url: (path = '/v1/chat/completions') => new URL(`http://127.0.0.1:${server.port}${path}`),
    requests,
    get opened() {
      return opened;
    },
    get closed() {
      return closed;
    },
    stop: () => server.stop(true),
  };
}

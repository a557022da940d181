/**
 * A TCP proxy on 127.0.0.1 port 0 in front of a real server (PostgreSQL), to make it unreachable
 * and bring it back without touching the server itself:
 *  - cut():   drops every open connection and refuses new ones (reset at once);
 *  - stall(): keeps connections open but forwards nothing (a hung network: only timeouts help);
 *  - restore(): forwards again (stalled bytes are delivered).
 */
import { createConnection, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  cut(): void;
  stall(): void;
  restore(): void;
  close(): Promise<void>;
}

function connect([a, b]: [Socket, Socket]) {
  a.pipe(b);
  b.pipe(a);
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let mode: 'up' | 'cut' | 'stall' = 'up';
  const pairs = new Set<[Socket, Socket]>();

  const server = createServer((client) => {
    if (mode === 'cut') return void client.destroy();
    const upstream = createConnection(targetPort, targetHost);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    if (mode === 'up') connect(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  return {
    port,
    cut() {
      mode = 'cut';
      for (const pair of pairs) for (const s of pair) s.destroy();
      pairs.clear();
    },
    stall() {
      mode = 'stall';
      for (const [a, b] of pairs) {
        a.unpipe(b).pause();
        b.unpipe(a).pause();
      }
    },
    restore() {
      if (mode === 'stall') for (const pair of pairs) connect(pair);
      mode = 'up';
    },
    async close() {
      for (const pair of pairs) for (const s of pair) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A TCP proxy on 127.0.0.1 port 0 in front of a real server (PostgreSQL), to make it unreachable
 * and bring it back without touching the server itself:
 *  - cut():   drops every open connection and refuses new ones (reset at once);
 *  - stall(): keeps connections open but forwards nothing (a hung network: only timeouts help);
 *  - restore(): forwards again (stalled bytes are delivered);
 *  - loseNextCommitAck(): the next time the server acknowledges a COMMIT (PostgreSQL's
 *    CommandComplete "COMMIT"), that connection is dropped instead: the transaction is committed
 *    and the client never hears it.
 */
import { createConnection, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  cut(): void;
  stall(): void;
  restore(): void;
  loseNextCommitAck(): void;
  /** How many COMMIT acknowledgements were dropped. */
  readonly lostAcks: number;
  close(): Promise<void>;
}

/** CommandComplete ('C', length 11, "COMMIT\0"). */
const COMMIT_ACK = Buffer.from([0x43, 0, 0, 0, 11, ...Buffer.from('COMMIT\0')]);

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let mode: 'up' | 'cut' | 'stall' = 'up';
  const pairs = new Set<[Socket, Socket]>();
  let loseAck = false;
  let lostAcks = 0;

  function connect([client, upstream]: [Socket, Socket]) {
    client.pipe(upstream);
    upstream.on('data', (data: Buffer) => {
      if (loseAck && data.includes(COMMIT_ACK)) {
        loseAck = false;
        lostAcks++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(data);
    });
    upstream.resume();
  }

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
        b.removeAllListeners('data').pause();
      }
    },
    loseNextCommitAck() {
      loseAck = true;
    },
    get lostAcks() {
      return lostAcks;
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

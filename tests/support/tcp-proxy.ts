/**
 * A TCP proxy on 127.0.0.1 port 0 in front of a real server (PostgreSQL), to make it unreachable
 * and bring it back without touching the server itself:
 *  - cut():   drops every open connection and refuses new ones (reset at once);
 *  - stall(): keeps connections open but forwards nothing (a hung network: only timeouts help);
 *  - restore(): forwards again (stalled bytes are delivered);
 *  - loseNextCommitAck(): the next time the server acknowledges a COMMIT (PostgreSQL's
 *    CommandComplete "COMMIT"), that connection is dropped instead: the transaction is committed
 *    and the client never hears it;
 *  - loseNextAck(tag): the same for the next CommandComplete whose tag starts with `tag`
 *    ("INSERT" for a statement committed on its own).
 */
import { createConnection, createServer, type Socket } from 'node:net';
import { openDatabase } from '../../src/platform/db';
import { createTestDatabase, type TestDatabase } from './db';

export interface TcpProxy {
  port: number;
  cut(): void;
  stall(): void;
  restore(): void;
  loseNextCommitAck(): void;
  loseNextAck(tag: string): void;
  /** How many acknowledgements were dropped. */
  readonly lostAcks: number;
  /** How many chunks clients have sent through (one per write that had to wait for an answer). */
  readonly clientChunks: number;
  close(): Promise<void>;
}

/** Is there a CommandComplete message ('C', int32 length, tag) whose tag starts with `tag` in `data`? */
function hasAck(data: Buffer, tag: Buffer): boolean {
  for (let at = data.indexOf(tag); at >= 0; at = data.indexOf(tag, at + 1)) if (at >= 5 && data[at - 5] === 0x43) return true;
  return false;
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let mode: 'up' | 'cut' | 'stall' = 'up';
  const pairs = new Set<[Socket, Socket]>();
  let loseAck: Buffer | null = null;
  let lostAcks = 0;
  let clientChunks = 0;

  function connect([client, upstream]: [Socket, Socket]) {
    client.pipe(upstream);
    client.on('data', () => clientChunks++);
    upstream.on('data', (data: Buffer) => {
      if (loseAck && hasAck(data, loseAck)) {
        loseAck = null;
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
      loseAck = Buffer.from('COMMIT\0');
    },
    loseNextAck(tag) {
      loseAck = Buffer.from(tag);
    },
    get lostAcks() {
      return lostAcks;
    },
    get clientChunks() {
      return clientChunks;
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

/** A proxy in front of the PostgreSQL server of `databaseUrl`, and the same URL through it. */
export async function startPostgresProxy(databaseUrl: string): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(databaseUrl);
  const proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
  target.host = `127.0.0.1:${proxy.port}`;
  return { proxy, url: target.toString() };
}

/**
 * A fresh PostgreSQL test database, and a handle on it through a proxy: `proxied` is `direct`
 * with its `database` opened through the proxy (for the code under test); `direct` checks the
 * outcome whatever the proxy does. The caller closes the proxy and drops `direct`.
 */
export async function createProxiedTestDatabase(maxConnections: number): Promise<{ direct: TestDatabase; proxied: TestDatabase; proxy: TcpProxy }> {
  const direct = await createTestDatabase('postgres');
  const { proxy, url } = await startPostgresProxy(direct.url!);
  const database = await openDatabase({ databaseUrl: url, maxConnections });
  return { direct, proxied: { ...direct, database }, proxy };
}

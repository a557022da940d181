/**
 * A TCP proxy on 127.0.0.1 port 0 in front of a real server (PostgreSQL), to make it unreachable
 * and bring it back without touching the server itself:
 *  - cut():   drops every open connection and refuses new ones (reset at once);
 *  - stall(): keeps connections open but forwards nothing (a hung network: only timeouts help);
 *  - holdAnswers(): passes on what clients send, holds back what the server answers, and keeps
 *    what clients sent from then on (sentWhileHeld());
 *  - restore(): forwards again (stalled and held bytes are delivered);
 *  - retarget(port): drops every open connection and sends new ones to another server (a
 *    failover that moved the address to a standby, or back);
 *  - loseNextCommitAck(): the next time the server acknowledges a COMMIT (PostgreSQL's
 *    CommandComplete "COMMIT"), that connection is dropped instead: the transaction is committed
 *    and the client never hears it;
 *  - loseNextAck(tag): the same for the next CommandComplete whose tag starts with `tag`
 *    ("INSERT" for a statement committed on its own).
 */
import type { Socket } from 'bun';
import { openDatabase } from '../../src/platform/db';
import { createTestDatabase, type TestDatabase } from './db';

export interface TcpProxy {
  port: number;
  cut(): void;
  stall(): void;
  holdAnswers(): void;
  /** What clients sent since holdAnswers(), as latin1 text. */
  sentWhileHeld(): string;
  restore(): void;
  retarget(port: number): void;
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

/** One client connection and its connection to the target, with the bytes each side has yet to be sent. */
interface Pair {
  client: Socket<Pair>;
  upstream: Socket<Pair> | null;
  toUpstream: Buffer[];
  toClient: Buffer[];
  closed: boolean;
}

/** Writes what `queue` holds as far as the socket takes it now; the rest waits for its drain. */
function pump(socket: Socket<Pair>, queue: Buffer[]) {
  while (queue.length) {
    const chunk = queue[0]!;
    const written = socket.write(chunk);
    if (written < chunk.length) {
      queue[0] = chunk.subarray(Math.max(written, 0));
      return;
    }
    queue.shift();
  }
}

/** On Bun's own sockets (`Bun.listen`, `Bun.connect`). */
export async function startTcpProxy(initialPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let targetPort = initialPort;
  let mode: 'up' | 'cut' | 'stall' | 'hold' = 'up';
  let sentWhileHeld = '';
  const pairs = new Set<Pair>();
  let loseAck: Buffer | null = null;
  let lostAcks = 0;
  let clientChunks = 0;

  function flush(pair: Pair) {
    if (mode === 'cut' || mode === 'stall' || pair.closed) return;
    if (pair.upstream) pump(pair.upstream, pair.toUpstream);
    if (mode === 'up') pump(pair.client, pair.toClient);
  }
  /** Both ends closed: reset at once (what was still to be sent dropped), or ended gracefully. */
  function closePair(pair: Pair, how: 'terminate' | 'end') {
    if (pair.closed) return;
    pair.closed = true;
    pairs.delete(pair);
    pair.client[how]();
    pair.upstream?.[how]();
  }
  const reset = (pair: Pair) => closePair(pair, 'terminate');
  /** One end closed: the other gets what was still to be sent to it (unless stalled), then an end. */
  function ended(pair: Pair) {
    flush(pair);
    closePair(pair, 'end');
  }

  const server = Bun.listen<Pair>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(client) {
        if (mode === 'cut') return void client.terminate();
        const pair: Pair = { client, upstream: null, toUpstream: [], toClient: [], closed: false };
        client.data = pair;
        pairs.add(pair);
        Bun.connect<Pair>({
          hostname: targetHost,
          port: targetPort,
          data: pair,
          socket: {
            open(upstream) {
              if (pair.closed) return void upstream.terminate();
              pair.upstream = upstream;
              flush(pair);
            },
            data(_upstream, data) {
              if (loseAck && hasAck(data, loseAck)) {
                loseAck = null;
                lostAcks++;
                return reset(pair);
              }
              pair.toClient.push(Buffer.from(data));
              flush(pair);
            },
            drain: () => flush(pair),
            close: () => ended(pair),
            error: () => reset(pair),
            connectError: () => reset(pair),
          },
        }).catch(() => reset(pair));
      },
      data(client, data) {
        clientChunks++;
        if (mode === 'hold') sentWhileHeld += data.toString('latin1');
        client.data.toUpstream.push(Buffer.from(data));
        flush(client.data);
      },
      drain: (client) => flush(client.data),
      close: (client) => client.data && ended(client.data),
      error: (client) => client.data && reset(client.data),
    },
  });

  return {
    port: server.port,
    cut() {
      mode = 'cut';
      for (const pair of [...pairs]) reset(pair);
    },
    stall() {
      mode = 'stall';
    },
    holdAnswers() {
      mode = 'hold';
      sentWhileHeld = '';
    },
    sentWhileHeld: () => sentWhileHeld,
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
      mode = 'up';
      for (const pair of pairs) flush(pair);
    },
    retarget(port) {
      targetPort = port;
      for (const pair of [...pairs]) reset(pair);
    },
    async close() {
      for (const pair of [...pairs]) reset(pair);
      server.stop(true);
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

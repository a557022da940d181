/**
 * A plain-HTTP/1.1 client on the event loop's own sockets (`Bun.connect`), with a keep-alive pool
 * per origin: what the gateway uses to call its `http:` backends (supervised engines, a vLLM or
 * llama.cpp server on the LAN) with ROUTER_UPSTREAM_CLIENT=http1; fetch is the default
 * (docs/decisions/0021-upstream-http-client.md).
 *
 * Why not `fetch`: Bun's fetch runs every request on its HTTP client thread and hands it over and
 * back through the event loop. Measured with Bun 1.4.5 against a local Bun.serve that answers a
 * chat completion (client process CPU per request, two runs each): fetch 57–67 µs at 64 requests
 * in flight and 75–108 µs one at a time; a client on `Bun.connect` 27–30 µs and 48–58 µs, with p50
 * 0.06–0.08 against 0.11–0.12 ms at c=1. undici (the npm package, on Bun's node:net) took
 * 144–336 µs, node:http 128–164 µs.
 *
 * Scope, kept small on purpose: requests carry a string body; answers are framed by
 * Content-Length, chunked transfer coding or the connection's close; `accept-encoding: identity`
 * is sent, and an answer with any other content coding is an error. `https:` origins and hosts
 * reached through an HTTP proxy (`http_proxy`) go through fetch (`fetchPost`; the router's
 * backends say which with `direct`).
 */
import type { Socket } from 'bun';
import { AnswerFraming } from './http1-framing';

/** An answer: status and headers at once, the body as it arrives. */
export interface HttpAnswer {
  readonly status: number;
  readonly ok: boolean;
  /** A header's value by its lower-case name. */
  header(name: string): string | null;
  /** The whole body as text. */
  text(): Promise<string>;
  /** The body piece by piece, in the shape of a ReadableStream's reader. */
  reader(): BodyReader;
  /** Drops the rest of the body (and the connection, if the body is not over). */
  cancel(): void;
}

export interface BodyReader {
  read(): Promise<{ done: boolean; value?: Uint8Array }>;
  cancel(): Promise<void>;
}

export interface PostInit {
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
}

/** Idle connections kept per origin; more are closed when they finish. */
const MAX_IDLE_PER_ORIGIN = 256;
/** An idle connection is closed after this long (servers close theirs after 5–75 s). */
const IDLE_SECONDS = 4;
/** Body bytes buffered for a reader that does not keep up, past which the socket stops reading. */
const PAUSE_BYTES = 1 << 20;

const decoder = new TextDecoder();
const done = { done: true } as const;

/** One answer being received: a queue of body pieces for its reader. */
class Answer implements HttpAnswer {
  readonly ok: boolean;
  private pieces: Uint8Array[] = [];
  private buffered = 0;
  private ended = false;
  private failure: unknown = null;
  private waiter: { resolve: (v: { done: boolean; value?: Uint8Array }) => void; reject: (e: unknown) => void } | null = null;

  constructor(
    readonly status: number,
    private readonly headers: Map<string, string>,
    private readonly connection: Connection,
  ) {
    this.ok = status >= 200 && status < 300;
  }

  header(name: string): string | null {
    return this.headers.get(name) ?? null;
  }

  push(piece: Uint8Array): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ done: false, value: piece });
      return;
    }
    this.pieces.push(piece);
    this.buffered += piece.length;
    if (this.buffered > PAUSE_BYTES) this.connection.pause(this);
  }

  end(): void {
    this.ended = true;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve(done);
    }
  }

  fail(err: unknown): void {
    if (this.ended) return;
    this.failure = err;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(err);
    }
  }

  read = (): Promise<{ done: boolean; value?: Uint8Array }> => {
    const piece = this.pieces.shift();
    if (piece) {
      this.buffered -= piece.length;
      if (this.buffered <= PAUSE_BYTES) this.connection.resume(this);
      return Promise.resolve({ done: false, value: piece });
    }
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve(done);
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  };

  reader(): BodyReader {
    return {
      read: this.read,
      cancel: async () => this.cancel(),
    };
  }

  async text(): Promise<string> {
    const parts: Uint8Array[] = [];
    for (;;) {
      const { done, value } = await this.read();
      if (done) break;
      parts.push(value!);
    }
    return decoder.decode(parts.length === 1 ? parts[0] : Buffer.concat(parts));
  }

  cancel(): void {
    if (this.ended || this.failure) return;
    this.fail(new Error('body cancelled'));
    this.connection.destroy();
  }
}

interface Exchange {
  resolve: (answer: Answer) => void;
  reject: (err: unknown) => void;
  answer: Answer | null;
  signal: AbortSignal;
  onAbort: () => void;
}

/** One keep-alive connection to an origin. */
class Connection {
  socket: Socket<Connection> | null = null;
  private exchange: Exchange | null = null;
  private unsent: Buffer | null = null;
  private readonly framing = new AnswerFraming({
    head: ({ status, headers }) => {
      const exchange = this.exchange!;
      exchange.answer = new Answer(status, headers, this);
      exchange.resolve(exchange.answer);
    },
    piece: (bytes) => this.exchange!.answer!.push(bytes),
    end: (reusable) => this.finish(reusable),
  });
  closed = false;
  /** Taken from the pool's idle connections rather than opened for this request. */
  reused = false;
  /** Whether any byte of the current answer arrived. */
  heard = false;

  constructor(readonly pool: Pool) {}

  /** Sends one request; resolves with the answer once its head has arrived. The signal aborts the exchange until its body ends. */
  send(request: Buffer, signal: AbortSignal): Promise<Answer> {
    this.heard = false;
    this.socket!.timeout(0);
    this.socket!.ref();
    return new Promise<Answer>((resolve, reject) => {
      const exchange: Exchange = {
        resolve,
        reject,
        answer: null,
        signal,
        onAbort: () => {
          if (this.exchange !== exchange) return;
          this.failExchange(signal.reason);
          this.destroy();
        },
      };
      this.exchange = exchange;
      signal.addEventListener('abort', exchange.onAbort, { once: true });
      if (this.closed) return this.failExchange(new Error('upstream closed the connection'));
      this.framing.expect();
      this.write(request);
    });
  }

  private write(bytes: Buffer): void {
    const n = this.socket!.write(bytes);
    this.unsent = n < bytes.length ? bytes.subarray(Math.max(n, 0)) : null;
  }

  drained(): void {
    if (this.unsent) this.write(this.unsent);
  }

  /** Stops reading while the answer's reader is more than PAUSE_BYTES behind. */
  pause(answer: Answer): void {
    if (this.exchange?.answer === answer) this.socket?.pause();
  }

  resume(answer: Answer): void {
    if (this.exchange?.answer === answer) this.socket?.resume();
  }

  received(data: Buffer): void {
    if (!this.exchange) {
      // Bytes nobody asked for: the connection is out of step.
      this.destroy();
      return;
    }
    this.heard = true;
    try {
      this.framing.feed(data);
    } catch (err) {
      this.failExchange(err);
      this.destroy();
    }
  }

  /** The answer's body is complete: the connection goes back to the pool, or is closed. */
  private finish(reusable: boolean): void {
    const exchange = this.settle()!;
    exchange.answer!.end();
    this.socket?.resume();
    // An answer that came before the whole request was written (a 413, say) leaves the connection mid-request.
    if (reusable && !this.closed && !this.unsent) this.pool.release(this);
    else this.destroy();
  }

  /** Ends the current exchange: it no longer listens to its signal. */
  private settle(): Exchange | null {
    const exchange = this.exchange;
    if (!exchange) return null;
    this.exchange = null;
    exchange.signal.removeEventListener('abort', exchange.onAbort);
    return exchange;
  }

  /** The server closed the connection (or it failed). */
  lost(err: unknown): void {
    if (this.closed) return;
    this.closed = true;
    this.pool.forget(this);
    if (!this.exchange || (!err && this.framing.closed())) return;
    this.failExchange(
      err ?? new Error(this.heard ? 'upstream closed the connection before the answer ended' : 'upstream closed the connection'),
    );
  }

  private failExchange(err: unknown): void {
    const exchange = this.settle();
    if (!exchange) return;
    if (exchange.answer) exchange.answer.fail(err);
    else exchange.reject(err);
  }

  destroy(): void {
    this.failExchange(new Error('upstream connection closed'));
    if (!this.closed) {
      this.closed = true;
      this.pool.forget(this);
    }
    this.socket?.terminate();
  }
}

const handlers = {
  data(socket: Socket<Connection>, data: Buffer) {
    socket.data.received(data);
  },
  drain(socket: Socket<Connection>) {
    socket.data.drained();
  },
  end(socket: Socket<Connection>) {
    socket.data.lost(null);
  },
  close(socket: Socket<Connection>, err?: Error) {
    socket.data.lost(err ?? null);
  },
  error(socket: Socket<Connection>, err: Error) {
    socket.data.lost(err);
  },
  timeout(socket: Socket<Connection>) {
    socket.data.destroy();
  },
};

/** The idle connections to one origin. */
class Pool {
  private readonly idle: Connection[] = [];

  constructor(
    readonly hostname: string,
    readonly port: number,
  ) {}

  /** The most recently used idle connection still open, if any. */
  takeIdle(): Connection | null {
    for (let c = this.idle.pop(); c; c = this.idle.pop()) {
      if (c.closed) continue;
      c.reused = true;
      return c;
    }
    return null;
  }

  async connect(): Promise<Connection> {
    const connection = new Connection(this);
    connection.socket = await Bun.connect<Connection>({ hostname: this.hostname, port: this.port, data: connection, socket: handlers });
    return connection;
  }

  release(c: Connection): void {
    if (this.idle.length >= MAX_IDLE_PER_ORIGIN) {
      c.destroy();
      return;
    }
    c.socket!.timeout(IDLE_SECONDS);
    // An idle connection does not keep the process alive.
    c.socket!.unref();
    this.idle.push(c);
  }

  forget(c: Connection): void {
    const i = this.idle.indexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
  }
}

const pools = new Map<string, Pool>();
/** Per URL: its origin's pool and the start of every request's head (parsed and built once). */
const targets = new Map<string, { pool: Pool; head: string }>();

function targetOf(href: string): { pool: Pool; head: string } {
  let target = targets.get(href);
  if (!target) {
    const url = new URL(href);
    let pool = pools.get(url.host);
    if (!pool) {
      pool = new Pool(url.hostname.replace(/^\[|\]$/g, ''), Number(url.port || 80));
      pools.set(url.host, pool);
    }
    target = { pool, head: `POST ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\naccept-encoding: identity\r\n` };
    targets.set(href, target);
  }
  return target;
}

/** The request's bytes in one buffer (header names and values are ASCII, so one UTF-8 encoding serves both). */
function requestBytes(head: string, init: PostInit): Buffer {
  let text = `${head}content-length: ${Buffer.byteLength(init.body)}\r\n`;
  for (const name in init.headers) text += `${name}: ${init.headers[name]}\r\n`;
  return Buffer.from(`${text}\r\n${init.body}`);
}

/** A POST over a pooled connection; rejects with the signal's reason when it aborts. */
export async function http1Post(url: string, init: PostInit): Promise<HttpAnswer> {
  const { pool, head } = targetOf(url);
  const request = requestBytes(head, init);
  init.signal.throwIfAborted();
  // An idle connection is taken at once; only a new one is raced against the signal.
  const connection = pool.takeIdle() ?? (await untilAborted(pool.connect(), init.signal));
  try {
    return await connection.send(request, init.signal);
  } catch (err) {
    // A reused connection the server closed while it was idle fails before a byte comes back:
    // the request never reached the application, so it is sent once more on a new connection.
    if (init.signal.aborted || !connection.reused || connection.heard) throw err;
    return (await untilAborted(pool.connect(), init.signal)).send(request, init.signal);
  }
}

/** A connection, unless the signal aborts first (a connect to an unreachable host can take minutes); one that comes late is closed. */
function untilAborted(connecting: Promise<Connection>, signal: AbortSignal): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      reject(signal.reason);
      connecting.then(
        (c) => c.destroy(),
        () => {},
      );
    };
    signal.addEventListener('abort', onAbort, { once: true });
    connecting.then(
      (c) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) c.destroy();
        else resolve(c);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** The same POST through Bun's fetch (TLS, HTTP proxies), seen as an HttpAnswer. */
export async function fetchPost(url: string, init: PostInit): Promise<HttpAnswer> {
  return fromFetch(await fetch(url, { method: 'POST', headers: init.headers, body: init.body, signal: init.signal }));
}

/** A fetch Response seen as an HttpAnswer. */
export function fromFetch(res: Response): HttpAnswer {
  let reader: BodyReader | null = null;
  const bodyReader = (): BodyReader => {
    reader ??= res.body ? res.body.getReader() : { read: async () => done, cancel: async () => {} };
    return reader;
  };
  return {
    status: res.status,
    ok: res.ok,
    header: (name) => res.headers.get(name),
    text: () => res.text(),
    reader: bodyReader,
    cancel: () => void (reader ? reader.cancel() : res.body?.cancel())?.catch(() => {}),
  };
}

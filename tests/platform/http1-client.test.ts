/**
 * The gateway's plain-HTTP/1.1 client against real sockets: a Bun.serve upstream, and a raw TCP
 * server (Bun.listen) that answers exactly the bytes each test scripts, split into pieces sent on
 * separate turns so every parser boundary is crossed.
 */
import { afterEach, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import type { Socket } from 'bun';
import { fetchPost, fromFetch, http1Post, type PostInit } from '../../src/platform/http/http1-client';
import { type ConnState, type Reply, rawServer } from '../support/raw-http-server';
import { waitFor } from '../support/wait';

/** Writes the bytes in pieces of `size`, each on its own turn of the event loop. */
async function dribble(socket: Socket<ConnState>, bytes: string | Buffer, size: number) {
  const all = Buffer.from(bytes);
  for (let i = 0; i < all.length; i += size) {
    socket.write(all.subarray(i, i + size));
    await new Promise((r) => setTimeout(r, 0));
  }
}

const okJson = (body: string, extra = '') =>
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
const post = (url: URL, body = '{"q":1}', signal = new AbortController().signal) =>
  http1Post(url.href, { headers: { 'content-type': 'application/json' }, body, signal });

const servers: Array<{ stop: () => void }> = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
});
function serve(reply: Reply) {
  const s = rawServer(reply);
  servers.push(s);
  return s;
}

describe('http1 client', () => {
  test('sequential requests share one keep-alive connection; the request carries host, length, identity coding and the headers', async () => {
    const s = serve((req, socket) => void socket.write(okJson(`{"echo":${req.body.toString()}}`)));
    for (let i = 0; i < 20; i++) {
      const answer = await post(s.url(), `{"i":${i}}`);
      expect(answer.status).toBe(200);
      expect(answer.header('content-type')).toBe('application/json');
      expect(JSON.parse(await answer.text())).toEqual({ echo: { i } });
    }
    expect(s.opened).toBe(1);
    expect(s.requests.map((r) => r.connection)).toEqual(Array(20).fill(1));
    const head = s.requests[0]!.head.toLowerCase();
    expect(head.startsWith('post /v1/chat/completions http/1.1\r\n')).toBe(true);
    expect(head).toContain(`host: 127.0.0.1:${s.url().port}`);
    expect(head).toContain('content-length: 7');
    expect(head).toContain('accept-encoding: identity');
    expect(head).toContain('content-type: application/json');
  });

  test('concurrent requests open connections as needed and reuse them afterwards', async () => {
    const s = serve((_, socket) => void setTimeout(() => socket.write(okJson('{}')), 5));
    await Promise.all(Array.from({ length: 8 }, () => post(s.url()).then((a) => a.text())));
    expect(s.opened).toBe(8);
    await Promise.all(Array.from({ length: 8 }, () => post(s.url()).then((a) => a.text())));
    expect(s.opened).toBe(8);
  });

  test('a content-length body sent one byte at a time, head included, arrives whole', async () => {
    const body = JSON.stringify({ text: 'zwölf Bytes, 中文, emoji 🙂'.repeat(4) });
    const s = serve((_, socket) => dribble(socket, okJson(body), 1));
    const answer = await post(s.url());
    expect(await answer.text()).toBe(body);
    // and the connection is clean for the next request
    expect(await (await post(s.url())).text()).toBe(body);
    expect(s.opened).toBe(1);
  });

  test('chunked bodies with extensions and trailers, split at every byte, decode exactly', async () => {
    const pieces = ['data: {"a":1}\n\n', 'data: {"b":"中文"}\n\n', 'x'.repeat(300), 'data: [DONE]\n\n'];
    const chunked = `${pieces.map((p) => `${Buffer.byteLength(p).toString(16)};ext=1\r\n${p}\r\n`).join('')}0\r\nx-trailer: yes\r\n\r\n`;
    const s = serve((_, socket) =>
      dribble(socket, `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: text/event-stream\r\n\r\n${chunked}`, 7),
    );
    for (let i = 0; i < 2; i++) {
      const answer = await post(s.url());
      expect(answer.header('content-type')).toBe('text/event-stream');
      expect(await answer.text()).toBe(pieces.join(''));
    }
    expect(s.opened).toBe(1);
  });

  test('the reader hands out pieces as they arrive, before the body ends', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    const s = serve(async (_, socket) => {
      socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n');
      await released;
      socket.write('4\r\nlast\r\n0\r\n\r\n');
    });
    const reader = (await post(s.url())).reader();
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString()).toBe('first');
    release();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe('last');
    expect((await reader.read()).done).toBe(true);
  });

  test('a body delimited by the close of the connection ends there; the next request opens a new one', async () => {
    const s = serve(async (_, socket) => {
      await dribble(socket, 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end', 5);
      socket.end();
    });
    expect(await (await post(s.url())).text()).toBe('until the end');
    expect(await (await post(s.url())).text()).toBe('until the end');
    expect(s.opened).toBe(2);
  });

  test('`connection: close` and HTTP/1.0 answers are not reused', async () => {
    const s = serve((req, socket) => {
      const v = req.connection % 2 === 1 ? okJson('{}', 'connection: close\r\n') : okJson('{}').replace('HTTP/1.1', 'HTTP/1.0');
      socket.write(v);
    });
    for (let i = 0; i < 4; i++) await (await post(s.url())).text();
    expect(s.opened).toBe(4);
  });

  test('1xx answers before the real one are skipped; an empty 204 frees the connection at once', async () => {
    const s = serve((req, socket) => {
      if (req.body.toString() === 'empty') return void socket.write('HTTP/1.1 204 No Content\r\n\r\n');
      socket.write(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n${okJson('{"ok":true}')}`);
    });
    const answer = await post(s.url());
    expect(answer.status).toBe(200);
    expect(await answer.text()).toBe('{"ok":true}');
    const empty = await post(s.url(), 'empty');
    expect(empty.status).toBe(204);
    expect(await empty.text()).toBe('');
    expect(s.opened).toBe(1);
  });

  test('error statuses are answers, not failures', async () => {
    const s = serve(
      (_, socket) => void socket.write('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 23\r\n\r\n{"error":"overloaded"}\n'),
    );
    const answer = await post(s.url());
    expect(answer.ok).toBe(false);
    expect(answer.status).toBe(503);
    expect(JSON.parse(await answer.text())).toEqual({ error: 'overloaded' });
  });

  test('a kept connection the server dropped while idle is replaced, and the request is sent once on the new one', async () => {
    // The server answers the first request on each connection, and drops a connection that sends a second,
    // as a server whose idle timeout fires just as the request arrives.
    const s = serve((req, socket) => {
      if (s.requests.filter((r) => r.connection === req.connection).length > 1) return void socket.terminate();
      socket.write(okJson(`{"on":${req.connection}}`));
    });
    expect(await (await post(s.url())).text()).toBe('{"on":1}');
    expect(await (await post(s.url())).text()).toBe('{"on":2}');
    expect(s.opened).toBe(2);
    expect(s.requests.map((r) => r.connection)).toEqual([1, 1, 2]);
  });

  test('a new connection closed before any answer fails the request, without a retry', async () => {
    const s = serve((_, socket) => void socket.terminate());
    await expect(post(s.url())).rejects.toThrow();
    expect(s.opened).toBe(1);
    expect(s.requests).toHaveLength(1);
  });

  test('a connection closed or reset in the middle of a body fails its reader', async () => {
    const s = serve((req, socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part');
      setTimeout(() => (req.body.toString() === 'reset' ? socket.terminate() : socket.end()), 5);
    });
    await expect((await post(s.url(), 'end')).text()).rejects.toThrow('upstream closed the connection before the answer ended');
    await expect((await post(s.url(), 'reset')).text()).rejects.toThrow('ECONNRESET');
  });

  test('abort before the head and in the middle of a stream: the promise or reader fails with the reason, the connection is closed', async () => {
    const s = serve((req, socket) => {
      if (req.body.toString() === 'stream') socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n');
    });
    const before = new AbortController();
    const pending = post(s.url(), 'silent', before.signal);
    await waitFor(() => s.requests.length === 1, 'the request to arrive');
    before.abort(new Error('gave up waiting'));
    await expect(pending).rejects.toThrow('gave up waiting');
    await waitFor(() => s.closed === 1, 'the connection to close');

    const during = new AbortController();
    const reader = (await post(s.url(), 'stream', during.signal)).reader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe('abc');
    const next = reader.read();
    during.abort(new Error('client went away'));
    await expect(next).rejects.toThrow('client went away');
    await waitFor(() => s.closed === 2, 'the streaming connection to close');
  });

  test('an abort after the body ended does not touch the connection, which serves the next request', async () => {
    const s = serve((_, socket) => void socket.write(okJson('{}')));
    const ac = new AbortController();
    expect(await (await post(s.url(), '{}', ac.signal)).text()).toBe('{}');
    ac.abort(new Error('late'));
    expect(await (await post(s.url())).text()).toBe('{}');
    expect(s.opened).toBe(1);
    expect(s.closed).toBe(0);
  });

  test('a 4 MiB request body is written whole (partial writes resume on drain); an 8 MiB answer is read whole', async () => {
    const big = JSON.stringify({ text: 'y'.repeat(4 * 1024 * 1024) });
    const answerBody = 'z'.repeat(8 * 1024 * 1024);
    const s = serve((req, socket) =>
      dribble(
        socket,
        `HTTP/1.1 200 OK\r\ncontent-length: ${answerBody.length}\r\nx-sha: ${createHash('sha256').update(req.body).digest('hex')}\r\n\r\n${answerBody}`,
        256 * 1024,
      ),
    );
    const answer = await post(s.url(), big);
    expect(answer.header('x-sha')).toBe(createHash('sha256').update(big).digest('hex'));
    expect((await answer.text()).length).toBe(answerBody.length);
  });

  test('a reader that falls behind pauses the connection: the upstream is held back by TCP instead of filling memory, and every byte arrives once read', async () => {
    const total = 64 * 1024 * 1024;
    const piece = Buffer.alloc(256 * 1024, 'x');
    let sent = 0;
    let blocked = false;
    let pump = () => {};
    const upstream = Bun.listen({
      hostname: '127.0.0.1',
      port: 0,
      socket: {
        data(socket) {
          socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${total}\r\n\r\n`);
          pump = () => {
            while (sent < total) {
              const want = Math.min(piece.length, total - sent);
              const written = socket.write(piece.subarray(0, want));
              sent += Math.max(0, written);
              if (written < want) {
                blocked = true; // the kernel's buffers are full: wait for drain
                return;
              }
            }
          };
          pump();
        },
        drain() {
          blocked = false;
          pump();
        },
      },
    });
    servers.push(upstream);
    const other = serve((_req, socket) => void socket.write(okJson('{}')));

    const answer = await post(new URL(`http://127.0.0.1:${upstream.port}/v1/chat/completions`));
    // Several round trips on another connection: the event loop polls every socket meanwhile, so
    // a connection that was still read would take in more, and the upstream would send more. The
    // kernel's buffers fill before cpd's 1 MiB does (the upstream blocks for a moment while cpd
    // still reads), so the upstream is held back only once it stays blocked across the round trips.
    const roundTrips = async () => {
      for (let i = 0; i < 5; i++) expect((await post(other.url())).status).toBe(200);
    };
    let before = -1;
    await waitFor(
      async () => {
        before = sent;
        await roundTrips();
        return blocked && sent === before;
      },
      'the upstream to stay held back',
      { timeoutMs: 4_000 },
    );
    const held = sent;
    await roundTrips();
    expect(sent).toBe(held);
    expect(held).toBeLessThan(total / 2); // about 1 MiB in cpd, the rest in the kernel's socket buffers

    let received = 0;
    const reader = answer.reader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      received += value!.length;
    }
    expect(received).toBe(total);
    expect(sent).toBe(total);
  });

  test('an answer that comes before the whole request was written (413) leaves its connection out of the pool', async () => {
    let opened = 0;
    const server = Bun.listen<{ answered: boolean }>({
      hostname: '127.0.0.1',
      port: 0,
      socket: {
        open(socket) {
          opened++;
          socket.data = { answered: false };
        },
        data(socket) {
          if (socket.data.answered) return;
          socket.data.answered = true;
          // Stop reading, so the rest of the request cannot be written, and refuse it at once.
          socket.pause();
          socket.write('HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\n\r\n');
        },
      },
    });
    servers.push({ stop: () => server.stop(true) });
    const url = new URL(`http://127.0.0.1:${server.port}/v1/chat/completions`);
    const big = 'x'.repeat(16 * 1024 * 1024);
    expect((await post(url, big)).status).toBe(413);
    expect((await post(url, big)).status).toBe(413);
    expect(opened).toBe(2);
  });

  test('what is not HTTP/1.1 as asked is an error: garbage, a bad chunk size, a content coding cpd did not ask for', async () => {
    const answers = [
      'SSH-2.0-OpenSSH_9.6\r\n\r\n',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      'HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 2\r\n\r\nxx',
      'HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n',
    ];
    const s = serve((req, socket) => void socket.write(answers[Number(req.body.toString())]!));
    await expect(post(s.url(), '0')).rejects.toThrow('not HTTP/1.1');
    await expect((await post(s.url(), '1')).text()).rejects.toThrow('malformed chunk size');
    await expect(post(s.url(), '2')).rejects.toThrow('content-encoding gzip');
    await expect(post(s.url(), '3')).rejects.toThrow('invalid content-length');
    expect(s.opened).toBe(4);
  });

  test('nothing listening: the request fails', async () => {
    const s = serve(() => {});
    const url = s.url();
    s.stop();
    await expect(post(url)).rejects.toThrow();
  });

  test('against Bun.serve: JSON and a streamed body, over the own client and through fetch', async () => {
    const server = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      async fetch(req) {
        const body = await req.text();
        const stream = new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode('a'));
            c.enqueue(new TextEncoder().encode('b'));
            c.close();
          },
        });
        if (new URL(req.url).pathname === '/stream') return new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
        return Response.json({ got: body, auth: req.headers.get('authorization') });
      },
    });
    servers.push({ stop: () => server.stop(true) });
    const signal = new AbortController().signal;
    const base = `http://127.0.0.1:${server.port}`;
    for (const post of [
      (path: string, init: PostInit) => http1Post(`${base}${path}`, init),
      (path: string, init: PostInit) => fetchPost(`${base}${path}`, init),
    ]) {
      const json = await post('/json', { headers: { authorization: 'Bearer k' }, body: 'hello', signal });
      expect(json.status).toBe(200);
      expect(json.header('content-type')).toContain('application/json');
      expect(JSON.parse(await json.text())).toEqual({ got: 'hello', auth: 'Bearer k' });
      const reader = (await post('/stream', { headers: {}, body: '', signal })).reader();
      let text = '';
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value!).toString();
      expect(text).toBe('ab');
    }
  });

  test("against Node's http server (another implementation): JSON, a chunked stream, one connection, and its keep-alive timeout", async () => {
    // Node closes a connection idle for keepAliveTimeout (here 100 ms) and says so on stdout.
    const script = `
      const http = require('http');
      const s = http.createServer((req, res) => {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          if (req.url === '/stream') {
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            for (const i of [0, 1, 2]) res.write('data: ' + i + '\\n\\n');
            return setImmediate(() => res.end('data: [DONE]\\n\\n'));
          }
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ got: body, port: req.socket.remotePort }));
        });
      });
      s.keepAliveTimeout = 100;
      s.on('connection', (c) => { const port = c.remotePort; c.on('close', () => console.log('closed ' + port)); });
      s.listen(0, '127.0.0.1', () => console.log('port ' + s.address().port));`;
    const node = Bun.spawn(['node', '-e', script], { stdout: 'pipe', stderr: 'inherit' });
    servers.push({ stop: () => node.kill() });
    const lines: string[] = [];
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of node.stdout) lines.push(...decoder.decode(chunk).split('\n').filter(Boolean));
    })();
    const port = (await waitFor(() => lines.find((l) => l.startsWith('port ')), 'node to listen'))!.slice(5);
    const signal = new AbortController().signal;
    const call = async (path: string, body: string) => (await http1Post(`http://127.0.0.1:${port}${path}`, { headers: {}, body, signal })).text();
    const first = JSON.parse(await call('/json', 'a'));
    expect(first.got).toBe('a');
    expect(await call('/stream', '')).toBe('data: 0\n\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n');
    expect(JSON.parse(await call('/json', 'b'))).toEqual({ got: 'b', port: first.port });
    await waitFor(() => lines.includes(`closed ${first.port}`), 'node to close the idle connection');
    const after = JSON.parse(await call('/json', 'c'));
    expect(after.got).toBe('c');
    expect(after.port).not.toBe(first.port);
  });

  test('a fetch Response seen through the same interface (https: origins and proxied hosts go through fetch)', async () => {
    const res = new Response('{"a":1}', { status: 201, headers: { 'content-type': 'application/json' } });
    const answer = fromFetch(res);
    expect(answer.status).toBe(201);
    expect(answer.ok).toBe(true);
    expect(answer.header('content-type')).toBe('application/json');
    const reader = answer.reader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe('{"a":1}');
    expect((await reader.read()).done).toBe(true);
    expect(await fromFetch(new Response(null, { status: 204 })).text()).toBe('');
  });
});

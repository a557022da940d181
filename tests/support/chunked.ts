/**
 * A request body sent with Transfer-Encoding: chunked over a raw socket, as fast as the server
 * takes it, so a test sees how much the server read before it answered. The body is `opening`
 * followed by "a" up to `totalBytes`.
 *
 *   const r = await sendChunked(cpd.url, '/api/auth/login', { 'content-type': 'application/json' }, 80 * MiB);
 *   r.status        // 413
 *   r.sentBytes     // what the server took before it answered or closed
 */
import { connect } from 'node:net';

export interface ChunkedResult {
  /** Status line's code, or 0 when the server closed without answering. */
  status: number;
  /** The response body (de-chunked when the answer itself was chunked). */
  body: string;
  /** Body bytes written to the socket before the answer arrived or the socket closed. */
  sentBytes: number;
}

const CHUNK_BYTES = 256 * 1024;

/**
 * `open: true` sends `totalBytes` and then neither more nor the closing chunk, and waits for the
 * answer: a server that answers has refused the body before its end, and with no unread bytes in
 * flight the kernel has no reason to reset the connection under the answer.
 */
export async function sendChunked(
  base: string,
  path: string,
  headers: Record<string, string>,
  totalBytes: number,
  opening = '{"x":"',
  options: { open?: boolean } = {},
): Promise<ChunkedResult> {
  const { hostname, port } = new URL(base);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  let answered = false;
  let closed = false;
  socket.on('data', (d) => {
    received += d.toString('latin1');
    if (/\r\n\r\n/.test(received)) answered = true;
  });
  const ended = new Promise<void>((resolve) => {
    socket.once('close', () => {
      closed = true;
      resolve();
    });
    socket.on('error', () => {}); // EPIPE/ECONNRESET once the server stops reading: expected
  });
  const head = Object.entries({ host: 'cpd', 'transfer-encoding': 'chunked', connection: 'close', ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`);

  const filler = Buffer.alloc(CHUNK_BYTES, 'a');
  let sentBytes = 0;
  while (sentBytes < totalBytes && !answered && !closed) {
    const size = Math.min(CHUNK_BYTES, totalBytes - sentBytes);
    const data = sentBytes === 0 ? Buffer.concat([Buffer.from(opening), filler]).subarray(0, Math.max(size, opening.length)) : filler.subarray(0, size);
    const flushed = socket.write(Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]));
    sentBytes += data.length;
    // Backpressure: wait until the kernel took it, or the server answered or closed.
    if (!flushed)
      await new Promise<void>((resolve) => {
        const wake = () => {
          for (const event of ['drain', 'data', 'close']) socket.off(event, wake);
          resolve();
        };
        for (const event of ['drain', 'data', 'close']) socket.on(event, wake);
      });
  }
  if (!answered && !closed && !options.open) socket.write('0\r\n\r\n');
  await Promise.race([ended, new Promise((r) => setTimeout(r, 30_000))]);
  socket.destroy();

  const split = received.indexOf('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
  let body = split === -1 ? '' : received.slice(split + 4);
  if (/\r\ntransfer-encoding: chunked/i.test(received.slice(0, split))) body = dechunk(body);
  return { status, body: Buffer.from(body, 'latin1').toString('utf8'), sentBytes };
}

function dechunk(raw: string): string {
  let out = '';
  let rest = raw;
  for (;;) {
    const eol = rest.indexOf('\r\n');
    const size = Number.parseInt(rest.slice(0, eol), 16);
    if (!(size > 0)) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

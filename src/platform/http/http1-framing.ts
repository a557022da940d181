/**
 * Reads HTTP/1.1 answers off a byte stream, one at a time: the status line and headers, then the
 * body framed by Content-Length, chunked transfer coding or the connection's close (RFC 9112 §6).
 * No I/O: the connection feeds it bytes and hears about heads, body pieces and ends.
 */

/** Longest answer head accepted (Bun.serve's own limit for request heads is 16 KiB). */
const MAX_HEAD = 64 * 1024;
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

export class ProtocolError extends Error {}

export interface AnswerHead {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Map<string, string>;
}

export interface FramingEvents {
  head(head: AnswerHead): void;
  piece(bytes: Uint8Array): void;
  /** The body is complete; `reusable` says whether the connection may carry another request. */
  end(reusable: boolean): void;
}

type Body =
  | { kind: 'length'; remaining: number }
  | { kind: 'chunked'; state: 'size' | 'data' | 'data-end' | 'trailer'; remaining: number }
  | { kind: 'close' };

export class AnswerFraming {
  private input: Buffer | null = null;
  private body: Body | null = null;
  private keepAlive = true;

  constructor(private readonly on: FramingEvents) {}

  /** Whether an answer is being read (its head, or its body). */
  active = false;

  /** Starts reading the answer to a request just sent. */
  expect(): void {
    this.active = true;
    this.body = null;
  }

  /** Bytes from the connection; throws ProtocolError on what is not HTTP/1.1. */
  feed(data: Buffer): void {
    this.input = this.input ? Buffer.concat([this.input, data]) : data;
    while (this.input?.length && this.active) {
      if (!(this.body ? this.readBody() : this.readHead())) return;
    }
  }

  /** The connection closed: true when that ended a body delimited by the close. */
  closed(): boolean {
    if (!this.active || this.body?.kind !== 'close') return false;
    this.finish();
    return true;
  }

  /** Reads the status line and headers; false when more bytes are needed. */
  private readHead(): boolean {
    const input = this.input!;
    const end = input.indexOf(HEAD_END);
    if (end < 0) {
      if (input.length > MAX_HEAD) throw new ProtocolError('upstream answer head too large');
      return false;
    }
    const lines = input.toString('latin1', 0, end).split('\r\n');
    this.input = input.length > end + 4 ? input.subarray(end + 4) : null;
    const status = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0]!);
    if (!status) throw new ProtocolError('upstream answered something that is not HTTP/1.1');
    const code = Number(status[2]);
    const headers = new Map<string, string>();
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      if (colon <= 0) throw new ProtocolError('upstream sent a malformed header line');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      const before = headers.get(name);
      headers.set(name, before === undefined ? value : `${before}, ${value}`);
    }
    // 1xx answers (100 Continue, 103 Early Hints) precede the real one.
    if (code < 200) return true;
    const coding = headers.get('content-encoding');
    if (coding && coding.toLowerCase() !== 'identity')
      throw new ProtocolError(`upstream answered with content-encoding ${coding}, which cpd did not ask for`);
    const connection = headers.get('connection')?.toLowerCase() ?? '';
    this.keepAlive = status[1] === '1' ? !connection.includes('close') : connection.includes('keep-alive');
    const length = headers.get('content-length');
    if (headers.get('transfer-encoding')?.toLowerCase().includes('chunked')) this.body = { kind: 'chunked', state: 'size', remaining: 0 };
    else if (code === 204 || code === 304) this.body = { kind: 'length', remaining: 0 };
    else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length)) throw new ProtocolError('upstream sent an invalid content-length');
      this.body = { kind: 'length', remaining: Number(length) };
    } else {
      this.body = { kind: 'close' };
      this.keepAlive = false;
    }
    this.on.head({ status: code, headers });
    if (this.body.kind === 'length' && this.body.remaining === 0) this.finish();
    return true;
  }

  /** Hands body bytes on; false when more bytes are needed. */
  private readBody(): boolean {
    const body = this.body!;
    const input = this.input!;
    if (body.kind === 'close') {
      this.input = null;
      this.on.piece(input);
      return false;
    }
    if (body.kind === 'length' || body.state === 'data') {
      const take = Math.min(body.remaining, input.length);
      this.input = take < input.length ? input.subarray(take) : null;
      this.on.piece(take === input.length ? input : input.subarray(0, take));
      body.remaining -= take;
      if (body.remaining > 0) return true;
      if (body.kind === 'length') this.finish();
      else body.state = 'data-end';
      return true;
    }
    switch (body.state) {
      case 'size': {
        const eol = input.indexOf(CRLF);
        if (eol < 0) {
          if (input.length > 1024) throw new ProtocolError('upstream sent a malformed chunk size');
          return false;
        }
        const size = input.toString('latin1', 0, eol).split(';')[0]!.trim();
        if (!/^[0-9a-fA-F]{1,12}$/.test(size)) throw new ProtocolError('upstream sent a malformed chunk size');
        body.remaining = Number.parseInt(size, 16);
        body.state = body.remaining === 0 ? 'trailer' : 'data';
        this.input = input.subarray(eol + 2);
        return true;
      }
      case 'data-end': {
        if (input.length < 2) return false;
        if (input[0] !== 13 || input[1] !== 10) throw new ProtocolError('upstream sent a malformed chunk');
        this.input = input.subarray(2);
        body.state = 'size';
        return true;
      }
      case 'trailer': {
        const eol = input.indexOf(CRLF);
        if (eol < 0) return false;
        this.input = input.subarray(eol + 2);
        // An empty line ends the trailers and the body.
        if (eol === 0) this.finish();
        return true;
      }
    }
  }

  private finish(): void {
    // Bytes after the answer that nobody asked for: the connection is out of step.
    const reusable = this.keepAlive && !this.input?.length;
    this.input = null;
    this.body = null;
    this.active = false;
    this.on.end(reusable);
  }
}

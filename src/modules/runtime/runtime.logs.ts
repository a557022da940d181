/**
 * Size-rotated log files for supervised processes: <name>.log, then <name>.log.1 … .log.<keep>.
 * Hand-written (a few lines) because the rotating transports for pino run in worker threads,
 * which do not survive `bun build --compile`, and these are raw child outputs, not pino records
 * (docs/decisions/0010-child-log-rotation.md).
 */
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

export interface RotationOptions {
  maxBytes: number;
  keep: number;
}

export const DEFAULT_ROTATION: RotationOptions = { maxBytes: 10 * 1024 * 1024, keep: 3 };

export class RotatingLog {
  private fd: number | null = null;
  private size = 0;
  private closed = false;

  constructor(
    readonly path: string,
    private readonly opts: RotationOptions = DEFAULT_ROTATION,
  ) {
    mkdirSync(dirname(path), { recursive: true });
  }

  /** After close(), late output (a pipe still draining) is dropped. */
  write(data: string | Uint8Array): void {
    if (this.closed) return;
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    if (this.fd === null) this.open();
    if (this.size > 0 && this.size + bytes.length > this.opts.maxBytes) this.rotate();
    writeSync(this.fd!, bytes);
    this.size += bytes.length;
  }

  close(): void {
    this.closed = true;
    this.closeFd();
  }

  private closeFd() {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private open() {
    this.fd = openSync(this.path, 'a');
    this.size = fstatSync(this.fd).size;
  }

  private rotate() {
    this.closeFd();
    rmSync(`${this.path}.${this.opts.keep}`, { force: true });
    for (let i = this.opts.keep - 1; i >= 1; i--) {
      if (existsSync(`${this.path}.${i}`)) renameSync(`${this.path}.${i}`, `${this.path}.${i + 1}`);
    }
    renameSync(this.path, `${this.path}.1`);
    this.open();
  }
}

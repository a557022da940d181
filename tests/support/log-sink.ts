import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/platform/logger';

/** A real logger (src/platform/logger.ts) writing into an array instead of stdout. */
export function captureLogger(level = 'info'): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { log: createLogger(level, sink), lines };
}

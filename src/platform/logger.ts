/**
 * Structured JSON logs through pino, synchronous to stdout (no worker transports: they do not
 * survive `bun build --compile`). Secrets are redacted by key wherever they appear.
 */
import pino from 'pino';

export type Logger = pino.Logger;

export const REDACTED_KEYS = ['password', 'token', 'authorization', 'cookie', 'key', 'secret', 'code', 'challenge_token'];

export function createLogger(level: string, destination: pino.DestinationStream = pino.destination({ sync: true })): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACTED_KEYS.flatMap((k) => [k, `*.${k}`]), censor: '[redacted]' },
    },
    destination,
  );
}

/**
 * Structured JSON logs through pino, synchronous to stdout (no worker transports: they do not
 * survive `bun build --compile`). Secrets are redacted by key wherever they appear, and every
 * logged error goes through safeError: a failed query's parameters and values never reach a log.
 */
import pino from 'pino';
import { safeError } from './safe-error';

export type Logger = pino.Logger;

export const REDACTED_KEYS = ['password', 'token', 'authorization', 'cookie', 'key', 'secret', 'code', 'challenge_token'];

export function createLogger(level: string, destination: pino.DestinationStream = pino.destination({ sync: true })): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // `err` by convention (and an Error logged alone); `error` where a message string is usual.
      serializers: { err: safeError, error: (v: unknown) => (v !== null && typeof v === 'object' ? safeError(v) : v) },
      hooks: {
        // pino takes an Error logged alone as its own message: the safe one instead.
        logMethod(args, method) {
          const [first, second] = args as unknown[];
          if (first instanceof Error && typeof second !== 'string') return method.apply(this, [{ err: first }, safeError(first).message]);
          return method.apply(this, args);
        },
      },
      redact: { paths: REDACTED_KEYS.flatMap((k) => [k, `*.${k}`]), censor: '[redacted]' },
    },
    destination,
  );
}

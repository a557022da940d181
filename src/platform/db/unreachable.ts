/**
 * Telling "the database cannot be reached" apart from a failed query: the first is the
 * operator's problem (503, or one line at start-up), the second a bug (500).
 */

/** Socket errors of the driver's connection, and postgres.js's own connection states. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/**
 * SQLSTATEs of a server that is there but will not serve: shutting down, starting, out of
 * connections; or will not serve what DATABASE_URL names (3D000: no such database).
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '3D000']);

/** True when `err` (or any error in its cause chain) says the database could not be reached. */
export function isDatabaseUnreachable(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | null, depth = 0; e && typeof e === 'object' && depth < 8; e = e.cause as typeof e, depth++) {
    const code = e.code;
    if (typeof code !== 'string') continue;
    // Class 08: connection exception. Class 28: authentication refused (a wrong or rotated password).
    if (NETWORK_CODES.has(code) || UNAVAILABLE_STATES.has(code) || /^(08|28)[0-9A-Z]{3}$/.test(code)) return true;
  }
  return false;
}

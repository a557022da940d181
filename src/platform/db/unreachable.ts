/**
 * Telling "the database is not serving us" apart from a failed query: the first is the
 * operator's problem (503 on every route, rows retried until it serves again, or one line at
 * start-up), the second a bug (500).
 */

/** Socket errors of the driver's connection, and postgres.js's own connection states. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  // The server's SCRAM proof did not match: a server that is not the one DATABASE_URL names.
  'SASL_SIGNATURE_MISMATCH',
]);

/** TLS handshake failures: Node's (ERR_SSL_…, ERR_TLS_…) and OpenSSL's certificate checks (CERT_HAS_EXPIRED, UNABLE_TO_VERIFY_LEAF_SIGNATURE…). */
const TLS_CODE = /^ERR_(?:SSL|TLS)_|CERT|^UNABLE_TO_/;

/**
 * SQLSTATE classes of a server that is there but will not serve: 08 connection exception, 28
 * authentication refused (a wrong or rotated password), 53 insufficient resources (too many
 * connections, disk full), 57 operator intervention (shutting down, starting, a terminated
 * backend), 58 system error.
 */
const UNAVAILABLE_CLASS = /^(?:08|28|53|57|58)[0-9A-Z]{3}$/;

/**
 * Single SQLSTATEs that say the same wherever they are raised: no such database as DATABASE_URL
 * names (3D000); a read-only database refusing a write (25006: a standby after a failover, or
 * default_transaction_read_only).
 */
const UNAVAILABLE_STATES = new Set(['3D000', '25006']);

/**
 * SQLSTATEs that are an outage only when they refuse the connection itself, which PostgreSQL
 * raises as FATAL (the session ends): 55000 "database is not currently accepting connections"
 * (ALLOW_CONNECTIONS false), 42501 "permission denied for database" (CONNECT revoked). Raised by a
 * query (severity ERROR), they are a bug: a privilege the role lacks, currval before nextval.
 * postgres.js hands a connect-phase error to the query that opened the connection, like any
 * other, so the severity is what tells them apart.
 */
const REFUSED_AT_CONNECT = new Set(['55000', '42501']);

/** True when `err` (or any error in its cause chain) says the database is not serving us. */
export function isDatabaseUnreachable(err: unknown): boolean {
  for (let e = err as { code?: unknown; severity?: unknown; cause?: unknown } | null, depth = 0; e && typeof e === 'object' && depth < 8; e = e.cause as typeof e, depth++) {
    const code = e.code;
    if (typeof code !== 'string') continue;
    if (NETWORK_CODES.has(code) || TLS_CODE.test(code) || UNAVAILABLE_CLASS.test(code) || UNAVAILABLE_STATES.has(code)) return true;
    if (REFUSED_AT_CONNECT.has(code) && e.severity === 'FATAL') return true;
  }
  return false;
}

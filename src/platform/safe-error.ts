/**
 * An error as it may be logged or printed: type, message, stack frames, the SQLSTATE and the
 * names of the constraint, table and column involved, and the same for its causes. Never a
 * query's parameters or a row's values: drizzle's "Failed query: … params: …" message, the
 * `params`/`parameters` the drivers attach (postgres.js, PGlite), PostgreSQL's `detail`
 * ("Key (email)=(…) already exists", "Failing row contains (…)") and `where` are left out, and a
 * data exception's message ("invalid input syntax for type integer: "…"") has its quoted values
 * masked. Passwords hashes, token hashes, TOTP secrets and encrypted keys all travel as parameters.
 */

export interface SafeError {
  type: string;
  message: string;
  stack?: string;
  /** PostgreSQL's error code (23505 …); `code` itself is a redacted log key (TOTP codes). */
  sqlstate?: string;
  /** Any other error code (ECONNREFUSED, CONNECTION_CLOSED …). */
  syscode?: string;
  [field: string]: unknown;
}

/** PostgreSQL error fields that name things, never values, by the name logged and the drivers' names (PGlite, postgres.js). */
const NAME_FIELDS: Record<string, string[]> = {
  severity: ['severity'],
  schema: ['schema', 'schema_name'],
  table: ['table', 'table_name'],
  column: ['column', 'column_name'],
  constraint: ['constraint', 'constraint_name'],
  data_type: ['dataType', 'data_type'],
  routine: ['routine'],
};
/** Fields of other errors worth keeping (network and HTTP errors), when they are primitives. */
const PLAIN_FIELDS = ['errno', 'syscall', 'address', 'port', 'status', 'statusCode', 'kind', 'exitCode'];

const SQLSTATE = /^[0-9A-Z]{5}$/;
const MAX_DEPTH = 8;

/** The message without values: drizzle's wrapper is the query and its values (its cause says why); a data exception's quoted values are masked. */
function safeMessage(err: Record<string, unknown>, code: string | undefined): string {
  const message = typeof err.message === 'string' ? err.message : String(err.message ?? '');
  if (message.startsWith('Failed query:')) return 'query failed';
  if (code && SQLSTATE.test(code) && code.startsWith('22')) return message.split('\n')[0]!.replace(/"(?:[^"]|"")*"/g, '"…"');
  return message;
}

/** Only the "    at …" frames: the header line of a stack repeats the (unsafe) message. */
function framesOf(stack: unknown): string[] {
  return typeof stack === 'string' ? stack.split('\n').filter((line) => /^\s+at /.test(line)) : [];
}

export function safeError(value: unknown, depth = 0): SafeError {
  if (!value || typeof value !== 'object') return { type: typeof value, message: String(value) };
  const err = value as Record<string, unknown>;
  const code = typeof err.code === 'string' ? err.code : typeof err.code === 'number' ? String(err.code) : undefined;
  // PGlite's minified classes name themselves by `name` only; ours by their class.
  const named = typeof err.name === 'string' && err.name !== 'Error' ? err.name : undefined;
  const type = named ?? ((err.constructor as { name?: string } | undefined)?.name || 'Error');
  const message = safeMessage(err, code);
  const out: SafeError = { type, message };
  if (code && SQLSTATE.test(code)) {
    out.sqlstate = code;
    // Strings only: Bun sets a numeric `column` (source position) on every error.
    for (const [name, fields] of Object.entries(NAME_FIELDS)) {
      const value = fields.map((f) => err[f]).find((v) => typeof v === 'string' && v);
      if (value) out[name] = value;
    }
  } else {
    if (code) out.syscode = code;
    for (const field of PLAIN_FIELDS) if (typeof err[field] === 'string' || typeof err[field] === 'number') out[field] = err[field];
  }
  const frames = framesOf(err.stack);
  if (frames.length) out.stack = [`${type}: ${message}`, ...frames].join('\n');
  if (err.cause !== undefined && depth < MAX_DEPTH) out.cause = safeError(err.cause, depth + 1);
  if (Array.isArray(err.errors) && depth < MAX_DEPTH) out.errors = err.errors.slice(0, 5).map((e) => safeError(e, depth + 1));
  return out;
}

/** One line for a terminal: the safe message of `err` and of each cause. */
export function safeErrorText(value: unknown): string {
  const parts: string[] = [];
  for (let e: SafeError | undefined = safeError(value); e; e = e.cause as SafeError | undefined) {
    const code = e.sqlstate ?? e.syscode;
    const text = code ? `${e.message} (${code})` : e.message;
    if (text && text !== 'query failed') parts.push(text);
  }
  return parts.join(': ') || 'query failed';
}

/**
 * One database handle for the whole process: postgres.js when DATABASE_URL is set, PGlite in
 * DATA_DIR/pg otherwise. Both speak the same drizzle API, schema and migrations.
 */
import type { PGlite } from '@electric-sql/pglite';
import { sql, type SQL } from 'drizzle-orm';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import type { Db, DbOrTx } from './handles';
import { createPipeline } from './pipeline';
import { pgliteAssets } from './pglite-assets';
import { lockEmbeddedDatabase } from './pglite-lock';


export interface Database {
  kind: 'postgres' | 'pglite';
  db: Db;
  /** Rows of a raw query, whichever driver ran it. */
  query<T = Record<string, unknown>>(q: SQL, on?: DbOrTx): Promise<T[]>;
  /**
   * Rows of a hot statement run as a prepared statement ($1… parameters) on the connection behind
   * `on` (the pool or a caller's transaction). drizzle's execute() never prepares raw SQL, and
   * re-planning a hot ledger statement per call cost a third of its throughput (bench/ledger.ts).
   */
  prepared<T = Record<string, unknown>>(text: string, params: string[], on?: DbOrTx): Promise<T[]>;
  /**
   * Runs `fn` as one transaction. On PostgreSQL it is sent in one round trip (BEGIN, the
   * statements, COMMIT written together; pipeline.ts): `fn` must issue every statement of the
   * transaction with `prepared(…, on)` before its first await completes. On PGlite (in-process,
   * no round trips to save) it is an ordinary transaction.
   */
  pipelined<T>(fn: (on: DbOrTx) => Promise<T>): Promise<T>;
  /**
   * Subscribe to a PostgreSQL NOTIFY channel; resolves once listening. Returns unsubscribe.
   * `onListen` runs every time the subscription is (re)established, the first time included:
   * notifications sent while the LISTEN connection was down are lost, so a cache built from them
   * must reload there.
   */
  listen(channel: string, onPayload: (payload: string) => void, onListen?: () => void): Promise<() => Promise<void>>;
  notify(channel: string, payload: string, on?: DbOrTx): Promise<void>;
  /** `SELECT 1` bounded by timeoutMs. */
  ping(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
  /** PGlite only: the data directory as a tarball (test snapshots). */
  dump?(): Promise<Blob>;
}

export interface OpenOptions {
  databaseUrl: string | null;
  /** PGlite data directory; null keeps it in memory (tests). */
  pgliteDir?: string | null;
  /** A pre-migrated PGlite snapshot (dumpDataDir) to start from; skips initdb (tests). */
  pgliteSnapshot?: Blob;
  maxConnections?: number;
}

function rowsOf<T>(result: unknown): T[] {
  // postgres.js returns the row array itself; PGlite returns {rows}.
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

export async function openDatabase(opts: OpenOptions): Promise<Database> {
  return opts.databaseUrl ? openPostgres(opts.databaseUrl, opts.maxConnections ?? 10) : openPglite(opts);
}

/** The driver client behind a drizzle database or transaction (drizzle keeps it on its session). */
function driverOf<C>(on: DbOrTx): C {
  return (on as unknown as { session: { client: C } }).session.client;
}

/** What both drivers do the same way, through drizzle. */
function drizzleQueries(db: Db): Pick<Database, 'db' | 'query' | 'notify'> {
  return {
    db,
    query: async (q, on = db) => rowsOf(await on.execute(q)),
    async notify(channel, payload, on = db) {
      await on.execute(sql`select pg_notify(${channel}, ${payload})`);
    },
  };
}

/**
 * Seconds before a connection that closed with an error reconnects: doubling from 50 ms, at most
 * 1 s, with jitter; the LISTEN connection inherits it. postgres.js's default grows as 3^n / 100 s
 * up to 20 s, n counting the errors of all the pool's connections since one last connected: after
 * a PostgreSQL restart replicas kept answering 503 and missing NOTIFYs (revocations, prices) for
 * 10-20 s after the database was back (tests/e2e/replicas.pg-restart.binary.test.ts). A refused
 * connect costs the server nothing, so a one-second ceiling is cheap.
 */
const reconnectBackoff = (retries: number) => Math.min(0.05 * 2 ** retries, 1) * (0.5 + Math.random() / 2);

function openPostgres(url: string, max: number): Database {
  // fetch_types: false skips a query per new connection (its 8 KB answer takes ~2 ms to read on a
  // cold process, start-up time, docs/design/start-up.md). It only teaches the driver array types, and
  // nothing here needs them: drizzle sends and parses its array columns (api_keys.models) as text
  // literals itself, and no query binds a JS array.
  const options = { onnotice: () => {}, connect_timeout: 5, idle_timeout: 60, backoff: reconnectBackoff, fetch_types: false };
  const client = postgres(url, { max, ...options });
  // Its own connection, opened on first use: postgres.js lets a hand-sent BEGIN run only there.
  // Read-only outside a transaction: nothing sent on it can write outside BEGIN … COMMIT (pipeline.ts).
  const pipeline = createPipeline((onclose) => postgres(url, { max: 1, ...options, onclose, connection: { default_transaction_read_only: true } }));
  return {
    kind: 'postgres',
    ...drizzleQueries(drizzlePostgres(client) as unknown as Db),
    async prepared(text, params, on) {
      const recorded = on && pipeline.record(text, params, on);
      if (recorded) return (await recorded) as never[];
      const sqlClient = on ? driverOf<postgres.Sql>(on) : client;
      return (await sqlClient.unsafe(text, params, { prepare: true })) as never[];
    },
    pipelined: (fn) => pipeline.run(fn),
    async listen(channel, onPayload, onListen) {
      // postgres.js reconnects the LISTEN connection by itself and calls onListen after each LISTEN.
      const sub = await client.listen(channel, onPayload, onListen);
      return () => sub.unlisten();
    },
    ping: (timeoutMs) => pingWith(() => client`select 1`, timeoutMs),
    close: async () => {
      await Promise.all([client.end({ timeout: 5 }), pipeline.close()]);
    },
  };
}

async function openPglite(opts: OpenOptions): Promise<Database> {
  // Imported here, not at the top: a server on PostgreSQL does not pay for loading PGlite.
  const [{ PGlite: Embedded }, { drizzle: drizzlePglite }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
  ]);
  const unlock = opts.pgliteDir ? lockEmbeddedDatabase(opts.pgliteDir) : () => {};
  let pg: PGlite;
  try {
    pg = await Embedded.create({
      ...(opts.pgliteDir ? { dataDir: opts.pgliteDir } : {}),
      ...(opts.pgliteSnapshot ? { loadDataDir: opts.pgliteSnapshot } : {}),
      ...(await pgliteAssets()),
    });
  } catch (err) {
    unlock();
    throw err;
  }
  const db = drizzlePglite(pg) as unknown as Db;
  return {
    kind: 'pglite',
    ...drizzleQueries(db),
    // PGlite runs in-process: nothing to prepare, only the transaction's handle to use.
    prepared: async (text, params, on) => (await (on ? driverOf<PGlite>(on) : pg).query(text, params)).rows as never[],
    pipelined: (fn) => db.transaction(fn),
    // In-process: the subscription never drops, so onListen runs once.
    async listen(channel, onPayload, onListen) {
      const unlisten = await pg.listen(channel, onPayload);
      onListen?.();
      return unlisten;
    },
    ping: (timeoutMs) => pingWith(() => pg.query('select 1'), timeoutMs),
    async close() {
      await pg.close();
      unlock();
    },
    dump: () => pg.dumpDataDir('gzip'),
  };
}

async function pingWith(run: () => Promise<unknown>, timeoutMs: number): Promise<boolean> {
  let timer: Timer | undefined;
  try {
    await Promise.race([
      run(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      }),
    ]);
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

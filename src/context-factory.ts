import { accessSync, chmodSync, constants, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { AppContext } from './app-context';
import { type Config, ConfigError } from './config';
import { systemClock } from './platform/clock';
import { openDatabase } from './platform/db';
import { FatalError, rootMessage } from './platform/errors';
import { createLogger, type Logger } from './platform/logger';
import { createMetricsRegistry } from './platform/metrics/registry';

/**
 * DATA_DIR made by an older version or by hand may be 0755: close it to other accounts (what is
 * inside then cannot be reached whatever its own mode). Not created here: `cpd migrate` on
 * PostgreSQL writes nothing to DATA_DIR; a DATA_DIR owned by someone else is left as it is.
 */
function tightenDataDir(dataDir: string) {
  try {
    if ((statSync(dataDir).mode & 0o077) !== 0) chmodSync(dataDir, 0o700);
  } catch {}
}

/**
 * The embedded database's first files come out of PGlite's initial data directory with mode 0666,
 * which no umask touches (it sets them explicitly). They hold password hashes and TOTP secrets:
 * files 0600, folders 0700, once the database is open (files made later follow our umask).
 */
function closeToOthers(dir: string) {
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isDirectory()) chmodSync(path, 0o700);
    else if (entry.isFile() && (statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  }
  chmodSync(dir, 0o700);
}

export interface OpenOptions {
  /**
   * The database must exist already (commands that act on a served site, `cpd users create`):
   * an embedded database that is not there stops the command instead of creating a new one.
   */
  existing?: boolean;
}

/** Opens the site's database and builds the context the CLI commands share. */
export async function createContext(
  config: Config,
  log: Logger = createLogger(config.logLevel),
  opts: OpenOptions = {},
): Promise<AppContext & { shutdown(): Promise<void> }> {
  tightenDataDir(config.dataDir);
  let pgliteDir: string | null = null;
  if (!config.databaseUrl) {
    pgliteDir = join(config.dataDir, 'pg');
    if (opts.existing && !existsSync(join(pgliteDir, 'PG_VERSION')))
      throw new FatalError(
        `no database in DATA_DIR=${config.dataDir} (${pgliteDir} does not exist): point DATA_DIR or DATABASE_URL at the server's database, e.g. --env-file /etc/cpd/SITE.env`,
        2,
      );
    ensureWritableDir(pgliteDir);
  }
  const database = await openDatabase({ databaseUrl: config.databaseUrl, pgliteDir }).catch((err) => {
    if (err instanceof FatalError) throw err;
    throw new FatalError(`cannot open the database: ${rootMessage(err)}`);
  });
  // A small pool: reports are few and a replica's connections are not shared with the money path.
  const reportDatabase = config.databaseReadUrl
    ? await openDatabase({ databaseUrl: config.databaseReadUrl, maxConnections: 5 }).catch((err) => {
        throw new FatalError(`cannot open the read replica (DATABASE_READ_URL): ${rootMessage(err)}`);
      })
    : undefined;
  if (pgliteDir) closeToOthers(pgliteDir);
  const closers: Array<() => Promise<void> | void> = [];
  return {
    config,
    database,
    ...(reportDatabase ? { reportDatabase } : {}),
    log,
    clock: systemClock,
    metrics: createMetricsRegistry(),
    onShutdown: (fn) => closers.push(fn),
    async shutdown() {
      for (const fn of closers.reverse()) {
        try {
          await fn();
        } catch (err) {
          log.error({ err }, 'shutdown step failed');
        }
      }
      await reportDatabase?.close();
      await database.close();
    },
  };
}

/** Creates `dir` if needed and checks it is writable, or stops with one line naming `variable` (exit 2). */
export function ensureWritableDir(dir: string, variable = 'DATA_DIR'): void {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw new ConfigError(variable, `${dir} is not a writable directory (${(err as NodeJS.ErrnoException).code ?? rootMessage(err)})`);
  }
}

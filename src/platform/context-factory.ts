import type { Config } from '../config';
import { systemClock } from './clock';
import type { AppContext } from './context';
import { openDatabase } from './db';
import { join } from 'node:path';
import { mkdirSync } from 'node:fs';
import { FatalError, rootMessage } from './errors';
import { createLogger, type Logger } from './logger';

/** Opens the site's database and builds the context the CLI commands share. */
export async function createContext(config: Config, log: Logger = createLogger(config.logLevel)): Promise<AppContext & { shutdown(): Promise<void> }> {
  let pgliteDir: string | null = null;
  if (!config.databaseUrl) {
    pgliteDir = join(config.dataDir, 'pg');
    mkdirSync(pgliteDir, { recursive: true });
  }
  const database = await openDatabase({ databaseUrl: config.databaseUrl, pgliteDir }).catch((err) => {
    throw new FatalError(`cannot open the database: ${rootMessage(err)}`);
  });
  // A small pool: reports are few and a replica's connections are not shared with the money path.
  const reportDatabase = config.databaseReadUrl
    ? await openDatabase({ databaseUrl: config.databaseReadUrl, maxConnections: 5 }).catch((err) => {
        throw new FatalError(`cannot open the read replica (DATABASE_READ_URL): ${rootMessage(err)}`);
      })
    : undefined;
  const closers: Array<() => Promise<void> | void> = [];
  return {
    config,
    database,
    ...(reportDatabase ? { reportDatabase } : {}),
    log,
    clock: systemClock,
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

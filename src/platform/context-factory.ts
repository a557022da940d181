import type { Config } from '../config';
import { systemClock } from './clock';
import type { AppContext } from './context';
import { openDatabase } from './db';
import { join } from 'node:path';
import { mkdirSync } from 'node:fs';
import { FatalError, rootMessage } from './errors';
import { createLogger, type Logger } from './logger';
import { createMetricsRegistry } from './metrics/registry';

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
  const closers: Array<() => Promise<void> | void> = [];
  return {
    config,
    database,
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
      await database.close();
    },
  };
}

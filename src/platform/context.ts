import type { Config } from '../config';
import type { Clock } from './clock';
import type { Database } from './db';
import type { Logger } from './logger';

/** What every module's service factory may use; built once in cli/serve.ts (or by tests). */
export interface AppContext {
  config: Config;
  database: Database;
  /**
   * Where reports read (cost report, usage log, CSV export): the DATABASE_READ_URL replica, so a
   * heavy report never takes connections or I/O from the money path. Absent: `database`.
   */
  reportDatabase?: Database;
  log: Logger;
  clock: Clock;
  /** Register a closer run at graceful shutdown, in reverse order of registration. */
  onShutdown(fn: () => Promise<void> | void): void;
}

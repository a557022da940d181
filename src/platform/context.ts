import type { Config } from '../config';
import type { Clock } from './clock';
import type { Database } from './db';
import type { Logger } from './logger';

/** What every module's service factory may use; built once in cli/serve.ts (or by tests). */
export interface AppContext {
  config: Config;
  database: Database;
  log: Logger;
  clock: Clock;
  /** Register a closer run at graceful shutdown, in reverse order of registration. */
  onShutdown(fn: () => Promise<void> | void): void;
}

/**
 * How long a closer that writes queued rows keeps trying at shutdown before it logs what it could
 * not write. `cpd serve` gives all closers 10 s before it exits, so this must stay well inside.
 */
export const DRAIN_DEADLINE_MS = 6_000;

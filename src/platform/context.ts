import type { Config } from '../config';
import type { Clock } from './clock';
import type { Database } from './db';
import type { Logger } from './logger';
import type { MetricsRegistry } from './metrics/registry';

/** What every module's service factory may use; built once in cli/serve.ts (or by tests). */
export interface AppContext {
  config: Config;
  database: Database;
  log: Logger;
  clock: Clock;
  /** Prometheus registry every module adds its metrics to (GET /metrics). */
  metrics: MetricsRegistry;
  /** Register a closer run at graceful shutdown, in reverse order of registration. */
  onShutdown(fn: () => Promise<void> | void): void;
}

import type { Clock } from './clock';
import type { Database } from './db';
import type { ReplicaCount } from './http/rate-limit';
import type { Logger } from './logger';
import type { MetricsRegistry } from './metrics/registry';
import type { PlatformConfig } from './platform-config';

/**
 * What every module's service factory may use, over the configuration `C` the app parsed (the
 * app's AppContext, src/app-context.ts, is this over its whole Config); built once by
 * src/context-factory.ts (or by tests).
 */
export interface PlatformContext<C extends PlatformConfig> {
  config: C;
  database: Database;
  /**
   * Where reports read (cost report, usage log, CSV export): the DATABASE_READ_URL replica, so a
   * heavy report never takes connections or I/O from the money path. Absent: `database`.
   */
  reportDatabase?: Database;
  log: Logger;
  clock: Clock;
  /** Prometheus registry every module adds its metrics to (GET /metrics). */
  metrics: MetricsRegistry;
  /**
   * The live replicas of this site, which share every rate limit (`cpd serve` on PostgreSQL keeps
   * it with a heartbeat, modules/replicas). Absent: this process is alone (tests, CLI commands).
   */
  replicas?: ReplicaCount;
  /** Register a closer run at graceful shutdown, in reverse order of registration. */
  onShutdown(fn: () => Promise<void> | void): void;
}

/**
 * How long a closer that writes queued rows keeps trying at shutdown before it logs what it could
 * not write. `cpd serve` gives all closers 10 s before it exits, so this must stay well inside.
 */
export const DRAIN_DEADLINE_MS = 6_000;

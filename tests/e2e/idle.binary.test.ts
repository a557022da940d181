/**
 * An idle dist/cpd sleeps: with nobody calling, its event loop wakes only for its own timers
 * (wallet grants, the usage journal's flush, the event-loop lag sampler every 100 ms), not 100
 * times a second. prom-client's default lag sampler, a 10 ms timer, used about 1% of a core on a
 * server doing nothing; its wakes are what this counts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { type RunningBinary, startBinary } from '../support/binary';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { scrape } from '../support/prometheus';

const TOKEN = 'idle-metrics-token-0123456789';
/** How long the main thread is watched, and the most times it may block and wake meanwhile. */
const WATCH_MS = 2_000;
const MOST_WAKES = 100;

/** Times the process's main thread gave up the CPU to wait (a block in epoll, a futex, a read). */
const mainThreadWaits = (pid: number) => Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8'))![1]);

describe('an idle server (postgres)', () => {
  let db: TestDatabase;
  let cpd: RunningBinary;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    cpd = await startBinary({ env: { DATABASE_URL: db.url!, METRICS_TOKEN: TOKEN, USAGE_JOURNAL: 'on', SECRET_KEY: 'idle-secret-key-0123456789abcdef0123456789' } });
  }, 120_000);
  afterAll(async () => {
    await cpd?.stop();
    await db?.drop();
  });

  test(`its main thread waits fewer than ${MOST_WAKES} times in ${WATCH_MS / 1000} s, its runtime metrics loaded`, async () => {
    // The first scrape loads the metrics library and starts its lag sampler.
    const metrics = await scrape(`${cpd.url}/metrics`, { authorization: `Bearer ${TOKEN}` });
    expect(metrics.typeOf('nodejs_eventloop_lag_p99_seconds')).toBe('gauge');
    const before = mainThreadWaits(cpd.proc.pid);
    await Bun.sleep(WATCH_MS); // the window watched, not a wait for a condition
    const waits = mainThreadWaits(cpd.proc.pid) - before;
    expect(waits).toBeGreaterThan(0);
    expect(waits).toBeLessThan(MOST_WAKES);
  });
});

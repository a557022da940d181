/**
 * Replica membership: every `cpd serve` on PostgreSQL registers a row at start, heartbeats it every
 * HEARTBEAT_MS, and with each beat reads how many replicas beat within LIVE_AFTER_MS; it deletes
 * its row at a graceful stop. The count is what every rate limiter divides its limit by
 * (platform/http/rate-limit.ts), so N replicas admit the configured limit in total while the
 * request path never asks the database: the cost is one statement per replica per beat.
 *
 * A replica killed outright keeps counting until its heartbeat is LIVE_AFTER_MS old; until then the
 * others hold one share too few. A new replica counts itself at once, the others within a beat;
 * meanwhile the total may exceed the limit by its share. Time is the app clock (NTP on every host:
 * a few hundred milliseconds of skew against a 6 s window changes nothing).
 */
import { sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import type { ReplicaCount } from '../../platform/http/rate-limit';
import { newId } from '../../platform/ids';
import { ScrapeGauge } from '../../platform/metrics/hot';
import { cpdReplicas } from './replicas.tables';

export const HEARTBEAT_MS = 2_000;
/** Live: a heartbeat within three beats (one late beat under load does not drop a replica). */
export const LIVE_AFTER_MS = 3 * HEARTBEAT_MS;
/** Rows of replicas gone this long are deleted by whoever beats (killed ones leave theirs). */
const FORGET_AFTER_MS = 60 * 60_000;

export interface Membership extends ReplicaCount {
  readonly id: string;
  /** One heartbeat now: refresh this replica's row, read the live count (tests drive it with a manual clock). */
  beat(): Promise<void>;
  /** Stops the heartbeat and deletes this replica's row (graceful stop). */
  leave(): Promise<void>;
}

export function createMembership(ctx: AppContext): Membership {
  const id = newId('replica');
  let live = 1;
  let failing = false;
  const iso = (ms: number) => new Date(ms).toISOString();

  new ScrapeGauge(
    'cpd_replicas_live',
    'Replicas this one counts as live (heartbeat membership); every rate limit is divided by it',
    (report) => report(live),
  ).register(ctx.metrics);

  async function beat() {
    const now = ctx.clock.now().getTime();
    // One statement, so one round trip: the upsert and the clean-up run with the count, whose
    // snapshot does not see this replica's own upsert (hence `+ 1` and `id <>`). A heartbeat lost
    // with a database crash is written again one beat later, so its commit need not wait for the
    // disk: set_config(…, true) lasts until the end of the statement's own transaction, its commit
    // included (in the select list, so it runs).
    const rows = await ctx.database.query<{ others: number }>(
      sql`
      with beat as (
        insert into ${cpdReplicas} (id, started_at, heartbeat_at) values (${id}, ${iso(now)}::timestamptz, ${iso(now)}::timestamptz)
        on conflict (id) do update set heartbeat_at = excluded.heartbeat_at
      ), forgotten as (
        delete from ${cpdReplicas} where heartbeat_at < ${iso(now - FORGET_AFTER_MS)}::timestamptz
      )
      select count(*)::int as others, (select set_config('synchronous_commit', 'off', true)) as commit_mode
      from ${cpdReplicas} where id <> ${id} and heartbeat_at > ${iso(now - LIVE_AFTER_MS)}::timestamptz`,
    );
    const next = rows[0]!.others + 1;
    if (next !== live) ctx.log.info({ msg: 'live replicas changed; rate limits are shared by them', replicas: next, was: live });
    live = next;
  }

  return {
    id,
    get live() {
      return live;
    },
    async beat() {
      try {
        await beat();
        if (failing) ctx.log.info({ msg: 'replica heartbeat written again', replicas: live });
        failing = false;
      } catch (err) {
        // The last count stays: the database is away for everyone, nobody's share can change.
        if (!failing) ctx.log.warn({ err, replicas: live }, 'replica heartbeat failed; rate limits keep the last live count');
        failing = true;
      }
    },
    async leave() {
      await ctx.database
        .query(sql`delete from ${cpdReplicas} where id = ${id}`)
        .catch((err) => ctx.log.warn({ err }, 'could not delete the membership row of this replica; it lapses'));
    },
  };
}

/**
 * Joins the membership, beats every HEARTBEAT_MS and leaves at graceful shutdown. `joined` settles
 * after the first beat: `cpd serve` awaits it before it listens, so the first request already sees
 * its share, while the app is built meanwhile (docs/design/start-up.md). On PostgreSQL
 * only: the embedded database has one process by construction.
 */
export function joinMembership(ctx: AppContext): { membership: Membership; joined: Promise<void> } {
  const membership = createMembership(ctx);
  const joined = membership.beat();
  let beating: Promise<void> | null = null;
  const timer = setInterval(() => {
    // A beat slower than the interval is not stacked on.
    beating ??= membership.beat().finally(() => {
      beating = null;
    });
  }, HEARTBEAT_MS);
  timer.unref();
  ctx.onShutdown(async () => {
    clearInterval(timer);
    await beating;
    await membership.leave();
  });
  return { membership, joined };
}

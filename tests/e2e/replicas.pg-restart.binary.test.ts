/**
 * Three replicas (tests/support/replicas.ts) on a PostgreSQL cluster of the test's own
 * (tests/support/private-postgres.ts: the machine's server on 5432 serves every other test file
 * and is never restarted), restarted for real under load: a clean stop (`pg_ctl stop -m fast`,
 * what `systemctl restart postgresql` does) held down until every replica reports it, then a crash
 * (`pg_ctl restart -m immediate`: every backend killed, crash recovery on start) while gateway
 * calls, streams, agent turns and downloads keep coming through the proxy.
 *
 * What users must see: while the database is down, 503 `{"error":"database unavailable"}` on
 * /healthz and on writes (never a 500, never a dead replica); a request already admitted waits
 * for its usage commit and is answered once the database is back; afterwards every replica serves
 * again without a restart of cpd, and its LISTEN connection is back, so a price change and a
 * revocation reach all three within 1 s. The books are checked at the end
 * (tests/support/replica-scenario.ts, checkInvariants): nothing answered is unbilled, nothing
 * unanswered is billed, ledger == balance.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { type Published, replicaScenario, type User } from '../support/replica-scenario';
import { type ReplicaBed, startReplicaBed } from '../support/replicas';
import { waitFor } from '../support/wait';

const MODEL = 'm1';
const USERS = 4;
/** cpd's connect_timeout to PostgreSQL (src/platform/db/client.ts). */
const CONNECT_TIMEOUT_MS = 5_000;

describe('three replicas through a PostgreSQL restart (a private cluster)', () => {
  let bed: ReplicaBed;
  let s: ReturnType<typeof replicaScenario>;
  let published: Published;
  /** Failures the load saw that are not a 503 from a replica while the database was away. */
  const unexpected: string[] = [];

  beforeAll(async () => {
    // The default USAGE_SYNCHRONOUS_COMMIT=on: with off, a crash of PostgreSQL may lose the usage
    // commits of its last moments (docs/design/usage-commit.md), which the books below would count
    // as answers nobody paid for.
    bed = await startReplicaBed({ postgres: 'private', models: [MODEL] });
    s = replicaScenario(bed, MODEL);
    published = await s.publish();
    await s.setPrice(0.002);
    for (let i = 0; i < USERS; i++) await s.signUp(i);
    // Every replica prices at 0.002 (agent turns are counted at that price); every user has used
    // every replica, so each holds a wallet grant (admission from memory).
    for (const r of bed.replicas) await s.seesPrice(r.url, s.users[0]!, 1_000);
    for (const user of s.users) for (const r of bed.replicas) expect((await s.chatJson(r.url, user)).status).toBe(200);
  }, 120_000);

  afterAll(() => bed?.close());

  const healthz = async (url: string) => (await bed.recordingFetch(`${url}/healthz`)).status;

  /** LISTEN connections of the replicas, seen from the server: one per live replica once they are back. */
  const listening = async () =>
    (
      await bed.database.query<{ n: number }>(
        sql`select count(*)::int as n from pg_stat_activity where datname = 'cpd' and query ilike 'listen %' and state = 'idle'`,
      )
    )[0]!.n;

  /**
   * Users working through the proxy until stop(): JSON and streamed gateway calls, agent turns (a
   * session of their own each), downloads. A 503 is what a client may get while the database is
   * away; anything else that is not an answer goes to `unexpected`.
   */
  type Load = Awaited<ReturnType<typeof startLoad>>;

  function startLoad() {
    let running = true;
    const seen = { answered: 0, refused: 0, refusedByKind: {} as Record<string, number> };
    // `during`: the outage when the request was sent (its answer may come after the outage ended).
    const outcome = (what: string, status: number | 'error frame', during: string | null) => {
      if ((status === 503 || status === 'error frame') && (during ?? bed.outage) !== null) {
        seen.refused++;
        const kind = `${what.split(' [')[0]} ${status}`;
        seen.refusedByKind[kind] = (seen.refusedByKind[kind] ?? 0) + 1;
      } else if (status === 200 || status === 302) seen.answered++;
      else unexpected.push(`${what}: ${status} (${during ?? bed.outage ?? 'no outage'})`);
    };
    const worker = async (user: User, sessionId: string) => {
      for (let n = 0; running; n++) {
        const during = bed.outage;
        switch (n % 4) {
          case 0:
            outcome('chat', (await s.chatJson(bed.lb.url, user)).status, during);
            break;
          case 1:
            try {
              await s.chatStream(bed.lb.url, user);
              outcome('stream', 200, during);
            } catch (err) {
              outcome('stream', (err as { status?: number }).status ?? 0, during);
            }
            break;
          case 2: {
            // A turn refused before it started (503), answered, or failed with an error frame
            // (the database went away during it; the session accepts the next message).
            const turn = await s.streamTurn(bed.lb.url, user, sessionId, { role: 'user', content: 'hello' });
            outcome(
              `agent turn ${JSON.stringify(turn.frames.filter((f) => f.event === 'error'))}`,
              turn.status !== 200 ? turn.status : turn.answered ? 200 : 'error frame',
              during,
            );
            break;
          }
          default:
            outcome('download', await s.downloadFile(bed.lb.url, user, published, [503]), during);
        }
      }
    };
    return Promise.all(s.users.map((u) => s.newSession(u, false))).then((sessions) => {
      const done = Promise.all(s.users.map((u, i) => worker(u, sessions[i]!)));
      return {
        seen,
        async stop() {
          running = false;
          await done;
        },
      };
    });
  }

  /**
   * Waits until every replica answers /healthz 200 and its LISTEN connection is back; says after
   * how many ms (from `since`) each was true, for the log line the docs quote.
   */
  async function recovered(since: number) {
    // 5 s: about a second is usual; the driver's default backoff (up to 20 s) took 10-20 s.
    for (const r of bed.replicas)
      await waitFor(() => healthz(r.url), `/healthz 200 on ${r.url}`, { until: (st) => st === 200, timeoutMs: 5_000 });
    const healthy = Math.round(performance.now() - since);
    await waitFor(listening, 'three LISTEN connections', { until: (n) => n === 3, timeoutMs: 5_000 });
    return `all /healthz 200 after ${healthy} ms, all LISTEN back after ${Math.round(performance.now() - since)} ms`;
  }

  /**
   * Ends the outage: once the load answers again and cpd's connect timeout (5 s) has passed since
   * PostgreSQL was back (a connection opened while it restarted can hang until that timeout, and
   * the request waiting on it then answers 503), the load stops, its last requests still counted
   * as sent during the outage. Then a fresh load runs with no outage declared: a 503 is a failure.
   */
  async function outageOver(load: Load, upAt: number) {
    const answered = load.seen.answered;
    await waitFor(() => ({ n: load.seen.answered, t: performance.now() - upAt }), 'the load answering again, past the connect timeout', {
      until: ({ n, t }) => n >= answered + 8 && t > CONNECT_TIMEOUT_MS,
      timeoutMs: 30_000,
    });
    await load.stop();
    bed.outage = null;
    const after = await startLoad();
    await waitFor(() => after.seen.answered, 'answers after the outage', { until: (n) => n >= 16 });
    await after.stop();
  }

  /** A price change and a revocation made now are used by every replica within 1 s. */
  async function changesReachEveryone(nextPrice: number, user: User) {
    await s.setPrice(nextPrice);
    for (const r of bed.replicas) await s.seesPrice(r.url, user, 1_000);
    const fresh = await bed.call(bed.lb.url, 'POST', '/api/api-keys', user.token, { name: `revoke me ${nextPrice}` });
    expect(fresh.status).toBe(201);
    for (const r of bed.replicas) expect((await s.chatJson(r.url, user, fresh.body.key)).status).toBe(200);
    expect((await bed.call(bed.lb.url, 'DELETE', `/api/api-keys/${fresh.body.id}`, user.token)).status).toBe(204);
    for (const r of bed.replicas) {
      await waitFor(async () => (await s.chatJson(r.url, user, fresh.body.key)).status === 401, `revoked key refused on ${r.url}`, {
        timeoutMs: 1_000,
      });
    }
  }

  test('a clean stop (-m fast) under load: 503 on /healthz and writes everywhere while it is down; after start all recover, no cpd restart, changes reach all three within 1 s', async () => {
    const load = await startLoad();
    await waitFor(() => load.seen.answered, 'the load running', { until: (n) => n >= 8 });
    const user = s.users[0]!;
    bed.outage = 'postgres stopped';
    const stoppedAt = performance.now();
    await bed.pg!.stop('fast');
    for (const r of bed.replicas) {
      await waitFor(() => healthz(r.url), `/healthz 503 on ${r.url}`, { until: (st) => st === 503 });
      const write = await bed.call(r.url, 'POST', '/api/api-keys', user.token, { name: 'while down' });
      expect({ status: write.status, body: write.body }).toEqual({ status: 503, body: { error: 'database unavailable' } });
      const event = await bed.call(r.url, 'POST', '/v1/agents/sessions', user.keys.at(-1)!.key, { agent_id: 'agent_x' });
      expect(event.status).toBe(503);
    }
    const refusedWhileDown = load.seen.refused;
    await bed.pg!.start();
    const startedAt = performance.now();
    const back = await recovered(startedAt);
    console.log(
      `postgres stopped -m fast for ${Math.round(startedAt - stoppedAt)} ms; once it was up: ${back}; ` +
        `load: ${load.seen.answered} answered, ${load.seen.refused} refused (${refusedWhileDown} while it was down): ${JSON.stringify(load.seen.refusedByKind)}`,
    );
    await outageOver(load, startedAt);
    expect(bed.alive().length).toBe(3);
    expect(unexpected).toEqual([]);
    expect((await bed.call(bed.lb.url, 'GET', '/api/api-keys', user.token)).body.map((k: { name: string }) => k.name)).not.toContain(
      'while down',
    );
    await changesReachEveryone(0.003, user);
  }, 60_000);

  test('a crash (restart -m immediate) under load: only 503s meanwhile, then everyone recovers without a cpd restart; changes reach all three within 1 s', async () => {
    const load = await startLoad();
    await waitFor(() => load.seen.answered, 'the load running', { until: (n) => n >= 8 });
    bed.outage = 'postgres crashed';
    const crashedAt = performance.now();
    await bed.pg!.restart('immediate');
    const upAt = performance.now();
    const back = await recovered(upAt);
    console.log(
      `postgres restart -m immediate took ${Math.round(upAt - crashedAt)} ms; once it was up: ${back}; ` +
        `load: ${load.seen.answered} answered, ${load.seen.refused} refused: ${JSON.stringify(load.seen.refusedByKind)}`,
    );
    expect(await bed.pg!.log()).toContain('database system was not properly shut down; automatic recovery in progress');
    await outageOver(load, upAt);
    expect(bed.alive().length).toBe(3);
    expect(unexpected).toEqual([]);
    await changesReachEveryone(0.004, s.users[1]!);
    // Downloads and agent conversations work as before.
    await s.downloadZip(bed.lb.url, s.users[2]!, published);
    await s.conversation(
      s.users[3]!,
      bed.replicas.map((r) => r.url),
    );
  }, 60_000);

  test('invariants: ledger == balance everywhere, one usage row per answered request and turn, charges as answered, downloads recorded, 503 only during the outages', async () => {
    await s.checkInvariants();
  }, 30_000);
});

/**
 * The replica test bed (tests/support/replicas.ts): three `dist/cpd serve` processes on one
 * PostgreSQL database with one SECRET_KEY and one S3 store, behind a round-robin proxy. A mixed
 * scenario runs through the proxy (sign-ups, top-ups, gateway calls, agent conversations whose
 * turns land on different replicas, model downloads); then every database connection is cut and
 * restored; then one replica is killed with SIGKILL in the middle of gateway streams and agent
 * turns. At the end, with the survivors drained by SIGTERM, the books must balance
 * (tests/support/replica-scenario.ts, checkInvariants). A real PostgreSQL restart is in
 * replicas.pg-restart.binary.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { type Published, replicaScenario } from '../support/replica-scenario';
import { type ReplicaBed, startReplicaBed } from '../support/replicas';
import { BACKEND_HEADER } from '../support/round-robin-proxy';
import type { RunningBinary } from '../support/binary';
import { waitFor } from '../support/wait';

const MODEL = 'm1';
const USERS = 6;

describe('three replicas on one PostgreSQL behind a round-robin proxy', () => {
  let bed: ReplicaBed;
  let s: ReturnType<typeof replicaScenario>;
  let published: Published;

  beforeAll(async () => {
    bed = await startReplicaBed({ postgres: 'shared', models: [MODEL] });
    s = replicaScenario(bed, MODEL);
    published = await s.publish();
  }, 120_000);

  afterAll(() => bed?.close());

  test('sign-ups, logins, keys, top-ups with webhook replays, gateway JSON and SSE, agent conversations, downloads', async () => {
    await s.setPrice(0.002);
    const urls = bed.replicas.map((r) => r.url);
    await Promise.all(
      Array.from({ length: USERS }, async (_, i) => {
        const user = await s.signUp(i);
        if (i === 0) {
          const receipt = await bed.call(bed.lb.url, 'GET', `/api/billing/receipts/${user.paymentId}/download?token=${user.token}`);
          expect(receipt.status).toBe(200);
          expect(receipt.headers.get('content-disposition')).toStartWith('attachment;');
          expect(receipt.text).toContain('5.00 USD');
        }
        // Gateway calls through the proxy, JSON and streamed, with the openai client.
        for (let n = 0; n < 3; n++) {
          expect((await s.chatJson(bed.lb.url, user)).status).toBe(200);
          expect(await s.chatStream(bed.lb.url, user)).toBe(0.002);
        }
        // An agent conversation whose turns run on three different replicas.
        await s.conversation(user, [urls[i % 3]!, urls[(i + 1) % 3]!, urls[(i + 2) % 3]!]);
        // Downloads: the ZIP streamed from the shared store by one replica, the file as a 302 by another.
        await s.downloadZip(urls[i % 3]!, user, published);
        await s.downloadFile(urls[(i + 1) % 3]!, user, published);
      }),
    );
    // Round robin spread the work over all three.
    for (const r of bed.replicas) expect(bed.lb.served.get(r.url)!).toBeGreaterThan(USERS);
    // Download records are buffered for a moment; every replica writes its own.
    await waitFor(s.downloadRows, 'download records', { until: (n) => n === s.downloadsStarted });
  }, 60_000);

  test('a price change is used by every replica within 1 s (X-Cost)', async () => {
    await s.setPrice(0.003);
    for (const r of bed.replicas) await s.seesPrice(r.url, s.users[0]!, 1_000);
  });

  test('a revoked key is refused by every replica (gateway and agents) within 1 s, the other key still works', async () => {
    const user = s.users[1]!;
    const [revoked, kept] = user.keys as [(typeof user.keys)[number], (typeof user.keys)[number]];
    for (const r of bed.replicas) expect((await s.chatJson(r.url, user, revoked.key)).status).toBe(200);
    expect((await bed.call(bed.lb.url, 'DELETE', `/api/api-keys/${revoked.id}`, user.token)).status).toBe(204);
    for (const r of bed.replicas) {
      await waitFor(async () => (await s.chatJson(r.url, user, revoked.key)).status === 401, `key refused on ${r.url}`, {
        timeoutMs: 1_000,
      });
    }
    for (const r of bed.replicas) {
      expect((await s.chatJson(r.url, user, revoked.key)).status).toBe(401);
      expect((await bed.call(r.url, 'GET', '/v1/agents', revoked.key)).status).toBe(401);
      expect((await s.chatJson(r.url, user, kept.key)).status).toBe(200);
    }
    user.keys = [kept];
  });

  test('every database connection cut: all three answer 503 on /healthz and writes, stay up, and recover without a restart', async () => {
    const user = s.users[2]!;
    const direct = (r: RunningBinary, method: string, path: string, body?: unknown) => bed.call(r.url, method, path, user.token, body);
    // A usage row commits before its answer: every answered request is in the database already.
    expect(await s.usageRows()).toBe(s.answeredTotal());
    bed.outage = 'database cut';
    bed.pgLink!.cut();
    try {
      for (const r of bed.replicas) {
        await waitFor(async () => (await direct(r, 'GET', '/healthz')).status === 503, `/healthz 503 on ${r.url}`);
        const write = await direct(r, 'POST', '/api/api-keys', { name: 'while cut' });
        expect({ status: write.status, body: write.body }).toEqual({ status: 503, body: { error: 'database unavailable' } });
      }
    } finally {
      bed.pgLink!.restore();
    }
    for (const r of bed.replicas)
      await waitFor(async () => (await direct(r, 'GET', '/healthz')).status === 200, `/healthz 200 again on ${r.url}`);
    // No replica died of the cut (a write racing the closed socket once ended the process).
    expect(bed.alive().length).toBe(3);
    // Nothing written while cut: the refused key does not exist.
    expect((await bed.call(bed.lb.url, 'GET', '/api/api-keys', user.token)).body.map((k: { name: string }) => k.name)).not.toContain(
      'while cut',
    );

    // A revocation and a price change made now reach all three without a restart. Each LISTEN
    // connection comes back on its own reconnect backoff and its replica reloads then (a change
    // sent while it was away is not lost), so no 1 s bound right after the cut.
    const [revoked, kept] = user.keys as [(typeof user.keys)[number], (typeof user.keys)[number]];
    // The first requests after /healthz turned 200 may still meet a connection being replaced (503).
    for (const r of bed.replicas) {
      await waitFor(async () => (await s.chatJson(r.url, user, revoked.key)).status === 200, `the key used on ${r.url} after the cut`);
    }
    expect((await bed.call(bed.lb.url, 'DELETE', `/api/api-keys/${revoked.id}`, user.token)).status).toBe(204);
    await s.setPrice(0.004);
    for (const r of bed.replicas) {
      await waitFor(async () => (await s.chatJson(r.url, user, revoked.key)).status === 401, `key refused on ${r.url} after the cut`, {
        timeoutMs: 15_000,
      });
      await s.seesPrice(r.url, user, 15_000);
    }
    user.keys = [kept];
    bed.outage = null;
  }, 60_000);

  test('kill -9 of one replica mid-stream fails its streams and turns only; nobody pays for them; the others carry on', async () => {
    // Every answer so far, the victim's included, has its usage committed (it commits before the answer).
    expect(await s.usageRows()).toBe(s.answeredTotal());
    await waitFor(s.downloadRows, 'download records', { until: (n) => n === s.downloadsStarted });
    s.upstream({ content: Array.from({ length: 60 }, (_, i) => `word${i}`).join(' '), chunkDelayMs: 50 });
    const victim = bed.replicas[1]!;
    const streams = await Promise.all(
      Array.from({ length: 9 }, async (_, i) => {
        const user = s.users[i % USERS]!;
        const { data, response } = await bed
          .openai(bed.lb.url, user.keys.at(-1)!.key)
          .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'long' }], stream: true })
          .withResponse()
          .catch((err) => {
            // Seen in CI: a 503 "database unavailable" after about 5 s, right after the cut above. The replicas' logs
            // showed CONNECT_TIMEOUT: a pool slot whose socket closed with a write pending never sent a new
            // connection's startup message (the driver fix in patches/postgres@3.4.9.patch, tested in
            // tests/platform/driver.test.ts); the logs stay here in case.
            console.error(`opening a stream failed: ${err}\n${bed.warnings()}`);
            throw err;
          });
        const iterator = data[Symbol.asyncIterator]();
        expect((await iterator.next()).done).toBe(false); // the first chunk arrived: the stream is in flight
        return { user, backend: response.headers.get(BACKEND_HEADER)!, iterator };
      }),
    );
    expect(streams.filter((x) => x.backend === victim.url).length).toBeGreaterThan(0);
    // One agent turn in flight on each replica (a session without tools: a long streamed answer).
    const sessions = await Promise.all(bed.replicas.map((_, i) => s.newSession(s.users[i]!, false)));
    const turnStarted = bed.replicas.map(() => Promise.withResolvers<void>());
    const turns = bed.replicas.map((r, i) =>
      s.streamTurn(r.url, s.users[i]!, sessions[i]!, { role: 'user', content: 'tell me a long story' }, () => turnStarted[i]!.resolve()),
    );
    await Promise.all(turnStarted.map((t) => t.promise));
    await victim.stop('SIGKILL');

    const outcomes = await Promise.all(
      streams.map(async (x) => {
        let cost: number | null = null;
        try {
          for (let r = await x.iterator.next(); !r.done; r = await x.iterator.next()) {
            const usage = (r.value as { usage?: { cost?: number } | null }).usage;
            if (usage) cost = usage.cost ?? null;
          }
        } catch {
          // The connection broke: this client's stream failed.
        }
        if (cost !== null) {
          x.user.answered++;
          x.user.chargedMicros += Math.round(cost * 1_000_000);
        }
        return { onVictim: x.backend === victim.url, completed: cost !== null };
      }),
    );
    for (const o of outcomes) expect(o.completed).toBe(!o.onVictim);
    const turnOutcomes = await Promise.all(turns);
    expect(turnOutcomes.map((t) => t.answered)).toEqual(bed.replicas.map((r) => r !== victim));
    expect(turnOutcomes.map((t) => t.broken)).toEqual(bed.replicas.map((r) => r === victim));

    // The survivors carry on through the proxy (which skips the dead replica, as nginx does).
    s.upstream({ chunkDelayMs: 0 });
    for (let n = 0; n < 6; n++) expect((await s.chatJson(bed.lb.url, s.users[n % USERS]!)).status).toBe(200);
    await s.downloadZip(bed.lb.url, s.users[0]!, published);
    await s.conversation(s.users[3]!, [bed.lb.url, bed.lb.url, bed.lb.url]);
  }, 60_000);

  test('invariants: ledger == balance everywhere, one usage row per answered request and turn, charges as answered, downloads recorded, no 5xx', async () => {
    await s.checkInvariants();
  }, 30_000);
});

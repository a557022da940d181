/**
 * Two app instances on one database, each running its delivery worker: every delivery is
 * attempted by one of them per schedule (never by both), whether the receiver answers or fails.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { waitFor } from '../../support/wait';
import { type Receiver, startReceiver } from '../../support/webhook-receiver';

const BASE_MS = 300;
const EVENTS = 12;

describe('webhook workers on two replicas (postgres)', () => {
  let a: TestApp;
  let b: TestApp;
  let rx: Receiver;
  const env = { WEBHOOK_ALLOW_PRIVATE: 'true' };
  const build = { webhooks: { backoffBaseMs: BASE_MS, timeoutMs: 2_000, pollMs: 5 } };

  beforeAll(async () => {
    a = await createTestApp('postgres', env, { build });
    b = await createTestApp('postgres', env, { build, testDb: a.testDb });
    rx = startReceiver();
  });
  afterAll(async () => {
    await rx.close();
    await b.close();
    await a.close();
  });

  async function endpointFor(t: TestApp) {
    const user = await makeUser(t);
    const created = await t.request('POST', '/api/webhooks', { token: user.token, body: { url: rx.url, events: ['balance.low'] } });
    rx.secret = created.body.secret;
    return { user, endpointId: created.body.id as string };
  }

  test('answered: each event delivered exactly once', async () => {
    rx.received.length = 0;
    rx.mode = 'ok';
    const { user } = await endpointFor(a);
    for (let i = 0; i < EVENTS; i++) await (i % 2 ? a : b).services.webhooks.emitBalanceLow(user.id, { balance: i, threshold: 100 });
    await waitFor(() => rx.countsByEvent().size, `${EVENTS} events at the receiver`, { until: (n) => n === EVENTS });
    // Both workers keep polling a while longer: nothing arrives twice.
    const attempted = async () =>
      Number(
        (
          await a.ctx.database.query<{ n: number }>(
            sql`select count(*)::int as n from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id where d.user_id = ${user.id}`,
          )
        )[0]!.n,
      );
    await waitFor(attempted, 'every attempt recorded', { until: (n) => n === EVENTS });
    expect([...rx.countsByEvent().values()]).toEqual(Array(EVENTS).fill(1));
    expect(rx.received.every((r) => r.valid)).toBe(true);
  });

  test('failing: each delivery is attempted once per step of its schedule, by one replica', async () => {
    rx.received.length = 0;
    rx.mode = 'fail';
    const { user, endpointId } = await endpointFor(b);
    for (let i = 0; i < EVENTS; i++) await (i % 2 ? a : b).services.webhooks.emitBalanceLow(user.id, { balance: i, threshold: 100 });
    const attemptsOf = () =>
      a.ctx.database.query<{ id: string; attempts: number }>(
        sql`select id, attempts from webhook_deliveries where endpoint_id = ${endpointId}`,
      );
    await waitFor(attemptsOf, 'three attempts of every delivery', {
      until: (rows) => rows.length === EVENTS && rows.every((r) => r.attempts >= 3),
      timeoutMs: 20_000,
    });
    // Stop sending (disable), then compare what the receiver saw with the log.
    await b.services.webhooks.update(user.id, endpointId, { enabled: false });
    const rows = await attemptsOf();
    const logged = await a.ctx.database.query<{ delivery_id: string; n: number }>(
      sql`select delivery_id, count(*)::int as n from webhook_attempts where delivery_id in (select id from webhook_deliveries where endpoint_id = ${endpointId}) group by 1`,
    );
    const counts = rx.countsByEvent();
    const byEvent = new Map<string, number[]>();
    for (const r of rx.received) byEvent.set(r.eventId, [...(byEvent.get(r.eventId) ?? []), r.at]);
    expect(counts.size).toBe(EVENTS);
    for (const times of byEvent.values()) {
      // Attempt n+1 comes no sooner than the n-th backoff after attempt n (minus timer slack): never twice in one step.
      for (let n = 1; n < times.length; n++) expect(times[n]! - times[n - 1]!).toBeGreaterThanOrEqual(BASE_MS * 2 ** (n - 1) - 50);
    }
    const sent = [...counts.values()].reduce((x, y) => x + y, 0);
    const recorded = logged.reduce((x, r) => x + r.n, 0);
    // An attempt in flight when the endpoint was disabled may have reached the receiver before its row was written.
    expect(sent - recorded).toBeLessThanOrEqual(EVENTS);
    expect(recorded).toBe(rows.reduce((x, r) => x + r.attempts, 0));
  });
});

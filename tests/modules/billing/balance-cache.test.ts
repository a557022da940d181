/**
 * The gateway's balance cache follows every wallet change: after a cut of its LISTEN connection
 * (a TCP proxy in front of PostgreSQL) and across two app instances on one database, a top-up made
 * elsewhere is admitted by this process, and a process never refuses (402) a positive balance.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { buildApp } from '../../../src/app';
import { openDatabase } from '../../../src/platform/db';
import { AppError } from '../../../src/platform/errors';
import { createTestContext, type TestContext } from '../../support/app';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { makeUser } from '../../support/make';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy';
import { waitFor } from '../../support/wait';
import { ledgerSumMicros } from './support';

type App = { tc: TestContext; services: Awaited<ReturnType<typeof buildApp>>['services'] };

async function appOn(testDb: TestDatabase, upstream: FakeUpstream): Promise<App> {
  const tc = await createTestContext('postgres', { MODEL_BACKENDS: `m1=${upstream.url}` }, { testDb });
  const { services } = await buildApp(tc.ctx);
  return { tc, services };
}

const PRICE = 10_000n; // 0.01 per request

/** One request through the app's router (admission, upstream, usage): 'ok' or 'refused' (402). */
async function ask(app: App, userId: string): Promise<'ok' | 'refused'> {
  try {
    await app.services.router.completeChat({ caller: { userId, keyId: null }, body: { model: 'm1', messages: [{ role: 'user', content: 'hi' }] } });
    return 'ok';
  } catch (err) {
    if (err instanceof AppError && err.kind === 'payment_required') return 'refused';
    throw err;
  }
}

describe('balance cache (postgres)', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let upstream: FakeUpstream;
  let direct: App;
  let proxied: App;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    upstream = await startFakeUpstream({ models: ['m1'] });
    proxy = await startTcpProxy(Number(new URL(db.url!).port || 5432));
    const proxiedUrl = new URL(db.url!);
    proxiedUrl.port = String(proxy.port);
    const proxiedDb = await openDatabase({ databaseUrl: proxiedUrl.toString(), maxConnections: 4 });
    direct = await appOn(db, upstream);
    proxied = await appOn({ database: proxiedDb, url: proxiedUrl.toString(), drop: () => proxiedDb.close() }, upstream);
    await direct.services.pricing.setModelPrices([{ slug: 'm1', unit: 'per_request', price: 0.01 }]);
    await waitFor(() => proxied.services.pricing.priceOf('m1') !== null, 'the price reaches the second app');
    await Promise.all([direct.services.router.ready(), proxied.services.router.ready()]);
  });
  afterAll(async () => {
    await proxied?.tc.close();
    await direct?.tc.close();
    await proxy?.close();
    await upstream?.close();
    await db?.drop();
  });

  const topUp = (app: App, userId: string, micros: bigint, reference: string) =>
    app.services.billing.credit(app.tc.ctx.database.db, { userId, type: 'adjustment', amountMicros: micros, reference, description: 'top-up' });

  test('a top-up made while the LISTEN connection is cut is seen after it reconnects', async () => {
    const user = await makeUser(direct);
    expect(await ask(proxied, user.id)).toBe('refused'); // balance 0, now cached by the proxied app

    proxy.cut();
    await topUp(direct, user.id, 5n * PRICE, `cut-${user.id}`); // its NOTIFY cannot reach the proxied app
    proxy.restore();

    await waitFor(async () => (await ask(proxied, user.id)) === 'ok', 'the proxied app admits after reconnecting', { timeoutMs: 15_000 });
    // The admission may read the new balance on a pool connection before the LISTEN connection is
    // back (both reconnect within a second): the reconnect is awaited, not assumed to come first.
    await waitFor(() => proxied.tc.logs.join('\n').includes('wallet notifications reconnected'), 'the LISTEN connection reconnected');
  });

  test('two apps spending one wallet while it is topped up: none refuses a positive balance', async () => {
    const user = await makeUser(direct);
    await topUp(direct, user.id, 4n * PRICE, `start-${user.id}`);
    // Both apps spend concurrently while the other one tops the wallet up mid-way.
    const spend = (app: App) => Promise.all(Array.from({ length: 6 }, () => ask(app, user.id)));
    const [a, b] = await Promise.all([spend(direct), spend(proxied), topUp(direct, user.id, 20n * PRICE, `mid-${user.id}`)]);
    const served = [...a, ...b].filter((r) => r === 'ok').length;
    await direct.services.router.flushUsage();
    await proxied.services.router.flushUsage();

    // Then each app alone spends until refused: the refusal must come with the balance at or below zero.
    for (const app of [proxied, direct]) {
      let n = 0;
      while ((await ask(app, user.id)) === 'ok' && n < 100) n++;
      await app.services.router.flushUsage();
      expect(await direct.services.billing.getBalanceMicros(user.id)).toBeLessThanOrEqual(0n);
    }
    expect(served).toBeGreaterThan(0);
    expect(await ledgerSumMicros(direct.tc.ctx, user.id)).toBe(await direct.services.billing.getBalanceMicros(user.id));
  });
});

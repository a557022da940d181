/**
 * The gateway on the compiled binary for one funded caller: a PostgreSQL test database with model
 * `m1` priced and served by a fake upstream, a user with `balanceMicros` and an API key, and
 * `dist/cpd serve` on that database.
 */
import { buildApp } from '../../src/app';
import { createTestContext } from './app';
import { ensureBuilt, type RunningBinary, startBinary } from './binary';
import { createTestDatabase, type TestDatabase } from './db';
import { type FakeUpstream, startFakeUpstream } from './fake-upstream';
import { makeApiKey } from './make';

export interface GatewayBinary {
  db: TestDatabase;
  up: FakeUpstream;
  cpd: RunningBinary;
  /** The caller's `bfvk-` key. */
  key: string;
  /** Stops the binary and the upstream, drops the database. */
  close(): Promise<void>;
}

export async function startGatewayBinary(opts: {
  price: { unit: 'per_million_tokens' | 'per_request'; price: number };
  /** The caller's email; its part before `@` names the funds' ledger reference. */
  email: string;
  balanceMicros: bigint;
  env?: Record<string, string>;
}): Promise<GatewayBinary> {
  await ensureBuilt();
  const db = await createTestDatabase('postgres');
  const up = await startFakeUpstream({ models: ['m1'] });
  let cpd: RunningBinary;
  let key: string;
  try {
    const tc = await createTestContext('postgres', {}, { testDb: db });
    const { services } = await buildApp(tc.ctx);
    await services.pricing.setModelPrices([{ slug: 'm1', ...opts.price }]);
    const user = await services.accounts.createUser({ email: opts.email, password: 'binary-password' });
    key = (await makeApiKey({ services }, user.id)).key;
    const reference = opts.email.split('@')[0]!;
    await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: opts.balanceMicros, reference, description: 'funds' });
    await tc.close();
    cpd = await startBinary({ env: { DATABASE_URL: db.url!, MODEL_BACKENDS: `m1=${up.url}`, ...opts.env } });
  } catch (err) {
    await up.close();
    await db.drop();
    throw err;
  }
  return {
    db,
    up,
    cpd,
    key,
    async close() {
      await cpd.stop();
      await up.close();
      await db.drop();
    },
  };
}

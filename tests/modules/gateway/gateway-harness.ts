/**
 * A real listening cpd app (port 0) with fake upstreams behind MODEL_BACKENDS, priced models, a
 * funded user with an API key, and an official `openai` client pointed at the gateway.
 */
import OpenAI from 'openai';
import { createTestApp, type TestApp } from '../../support/app';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { makeApiKey, makeUser } from '../../support/make';
import type { DbKind, TestDatabase } from '../../support/db';
import type { Clock } from '../../../src/platform/clock';

export interface Harness {
  t: TestApp;
  up: FakeUpstream;
  baseUrl: string;
  close(): Promise<void>;
}

export async function startHarness(
  opts: {
    kind?: DbKind;
    env?: Record<string, string>;
    backends?: string;
    upstream?: FakeUpstream;
    clock?: Clock;
    testDb?: TestDatabase;
    /** The server's idle timeout in seconds (Bun's default otherwise: 10). */
    idleTimeout?: number;
  } = {},
): Promise<Harness> {
  const up = opts.upstream ?? (await startFakeUpstream({ models: ['m1'] }));
  const t = await createTestApp(opts.kind ?? 'postgres', { MODEL_BACKENDS: opts.backends ?? `m1=${up.url}`, RATE_LIMITS: 'gateway=100000/1s', ...opts.env }, { clock: opts.clock, testDb: opts.testDb });
  t.app.listen({ hostname: '127.0.0.1', port: 0, ...(opts.idleTimeout ? { idleTimeout: opts.idleTimeout } : {}) });
  const baseUrl = `http://127.0.0.1:${t.app.server!.port}`;
  return {
    t,
    up,
    baseUrl,
    async close() {
      await t.app.stop(true);
      await t.close();
      if (!opts.upstream) await up.close();
    },
  };
}

/** A user with `balanceMicros` on the wallet and an API key; `client` talks to the gateway with it. */
export async function fundedUser(h: Harness, balanceMicros: bigint, opts: { admin?: boolean } = {}) {
  const user = await makeUser(h.t, opts);
  const key = await makeApiKey(h.t, user.id);
  if (balanceMicros !== 0n)
    await h.t.services.billing.credit(h.t.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: balanceMicros, reference: `test-${user.id}`, description: 'test funds' });
  const client = new OpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: key.key, maxRetries: 0 });
  return { user, key, client, balance: () => h.t.services.billing.getBalanceMicros(user.id) };
}

export { waitFor } from '../../support/wait';

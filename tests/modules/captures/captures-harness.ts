/**
 * The captures tests' common ground: a listening app (gateway-harness.ts) with two priced models
 * on one fake upstream that wants its own API key, users whose keys capture, and readers of what
 * was stored (rows, raw objects, opened bodies).
 */
import OpenAI from 'openai';
import { sql } from 'drizzle-orm';
import { fundedUser, type Harness, startHarness } from '../gateway/gateway-harness';
import { startFakeUpstream } from '../../support/fake-upstream';
import type { Clock } from '../../../src/platform/clock';
import type { DbKind } from '../../support/db';

export const UPSTREAM_KEY = 'sk-upstream-secret-0123456789';

export async function startCaptureHarness(opts: { env?: Record<string, string>; clock?: Clock; kind?: DbKind } = {}): Promise<Harness> {
  const up = await startFakeUpstream({ models: ['m1', 'm2'], apiKey: UPSTREAM_KEY });
  const h = await startHarness({
    upstream: up,
    backends: `m1=${up.url}#env:UP_KEY,m2=${up.url}#env:UP_KEY`,
    env: { UP_KEY: UPSTREAM_KEY, ROUTES: 'auto=fallback:m2|m1', ...opts.env },
    clock: opts.clock,
    kind: opts.kind,
  });
  await h.t.services.pricing.setModelPrices([
    { slug: 'm1', unit: 'per_million_tokens', price: 1000 },
    { slug: 'm2', unit: 'per_million_tokens', price: 2000 },
  ]);
  const close = h.close;
  return {
    ...h,
    async close() {
      await close();
      await up.close();
    },
  };
}

/** A funded user with a second key made through the API with `capture: true`; `capturing` talks with it. */
export async function capturingUser(h: Harness, opts: { admin?: boolean } = {}) {
  const u = await fundedUser(h, 1_000_000_000n, opts);
  const made = await h.t.request<{ id: string; key: string; capture: boolean }>('POST', '/api/api-keys', { token: u.user.token, body: { name: 'captured', capture: true } });
  if (made.status !== 201 || made.body.capture !== true) throw new Error(`capture key not made: ${made.text}`);
  const capturing = new OpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: made.body.key, maxRetries: 0 });
  return { ...u, captureKey: made.body, capturing };
}

/** Every pending capture and usage row written. */
export async function settle(h: Harness) {
  await h.t.services.router.flushUsage();
  await h.t.services.captures.flush();
}

export const captureRows = (h: Harness, userId: string) =>
  h.t.ctx.database.query<Record<string, any>>(sql`select * from captures where user_id = ${userId} order by created_at, id`);

/** The stored object as bytes on the store (sealed), as text. */
export const rawObject = (h: Harness, objectKey: string) => new Response(h.t.services.store.read(objectKey)).text();

/** The ledger's sum for a user equals the wallet's balance. */
export async function ledgerMatches(h: Harness, userId: string, balance: bigint) {
  const [sum] = await h.t.ctx.database.query<{ s: string }>(sql`select coalesce(sum(amount_micros), 0)::text as s from wallet_transactions where user_id = ${userId}`);
  return BigInt(sum!.s) === balance;
}

/** POST /v1/router/replay with a bearer credential; the SSE frames' data when it streams. */
export async function replay(h: Harness, token: string, body: unknown) {
  const res = await fetch(`${h.baseUrl}/v1/router/replay`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  const sse = res.headers.get('content-type')?.includes('text/event-stream');
  const frames = sse ? text.split('\n\n').flatMap((f) => f.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6))) : [];
  return { status: res.status, headers: res.headers, text, json: sse ? null : JSON.parse(text), frames };
}

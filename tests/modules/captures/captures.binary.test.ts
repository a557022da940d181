/**
 * The compiled binary (`dist/cpd serve`) as a process: a capturing key's chat is captured, replayed
 * against another model, and both are listed with the replay pointing at its original.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { buildApp } from '../../../src/app';
import { createTestContext } from '../../support/app';
import { ensureBuilt, type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';
import { waitFor } from '../../support/wait';

let db: TestDatabase;
let up: FakeUpstream;
let cpd: RunningBinary;
let key: string;
let session: string;

beforeAll(async () => {
  await ensureBuilt();
  db = await createTestDatabase('postgres');
  up = await startFakeUpstream({ models: ['m1', 'm2'] });
  const tc = await createTestContext('postgres', {}, { testDb: db });
  const { services } = await buildApp(tc.ctx);
  await services.pricing.setModelPrices([
    { slug: 'm1', unit: 'per_million_tokens', price: 1000 },
    { slug: 'm2', unit: 'per_million_tokens', price: 2000 },
  ]);
  const user = await services.accounts.createUser({ email: 'capture-binary@example.com', password: 'binary-password' });
  key = (await services.accounts.createApiKey(user.id, { name: 'captured', capture: true })).key;
  session = (await services.accounts.createSession(user.id)).token;
  await services.billing.credit(tc.ctx.database.db, { userId: user.id, type: 'adjustment', amountMicros: 1_000_000n, reference: 'capture-binary', description: 'funds' });
  await tc.close();
  cpd = await startBinary({ env: { DATABASE_URL: db.url!, MODEL_BACKENDS: `m1=${up.url},m2=${up.url}` } });
}, 300_000);
afterAll(async () => {
  await cpd?.stop();
  await up?.close();
  await db?.drop();
});

const captures = async () => {
  const res = await fetch(`${cpd.url}/api/captures`, { headers: { authorization: `Bearer ${session}` } });
  return ((await res.json()) as { captures: Array<{ id: string; model: string; entrypoint: string; replay_of: string | null; completion_tokens: number }> }).captures;
};

describe('captures on the binary', () => {
  test('capture, then replay against another model: both visible, the replay pointing at its original', async () => {
    const client = new OpenAI({ baseURL: `${cpd.url}/v1`, apiKey: key, maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'binary capture' }] });
    expect(answer.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    // Captures are written after the answer, off the request path.
    await waitFor(async () => (await captures()).length === 1, 'the capture');
    const [original] = await captures();
    expect(original).toMatchObject({ model: 'm1', entrypoint: 'm1', replay_of: null });

    const res = await fetch(`${cpd.url}/v1/router/replay`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ capture_id: original!.id, model: 'm2' }) });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-replay-of')).toBe(original!.id);
    expect(res.headers.get('x-cost')).toBe('0.030000');
    const replayed = (await res.json()) as { model: string; choices: Array<{ message: { content: string } }> };
    expect(replayed.model).toBe('m2');

    await waitFor(async () => (await captures()).length === 2, 'the replay\'s capture');
    const [replay, first] = await captures();
    expect(first!.id).toBe(original!.id);
    expect(replay).toMatchObject({ model: 'm2', entrypoint: 'replay', replay_of: original!.id, completion_tokens: 5 });
    const detail = await fetch(`${cpd.url}/api/captures/${replay!.id}`, { headers: { authorization: `Bearer ${session}` } });
    const body = (await detail.json()) as { request: { model: string }; response: { choices: Array<{ message: { content: string } }> } };
    expect(body.request.model).toBe('m2');
    expect(body.response.choices[0]!.message.content).toBe(replayed.choices[0]!.message.content);
  });
});

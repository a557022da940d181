/**
 * The SMS send throttles hold exactly across replicas: two app instances on one database (as two
 * `cpd serve` behind a balancer) together admit 1 code a minute and 10 a day per phone and 20 an
 * hour per client address, however the requests are spread and however many arrive at once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { MINUTE, manualClock } from '../../support/clock';
import { createTestDatabase, type TestDatabase } from '../../support/db';

describe('SMS send throttles across two replicas on one database', () => {
  const clock = manualClock();
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  const env = { TRUST_PROXY: 'true' };
  const send = (app: TestApp, phone: string, address: string) =>
    app.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' }, headers: { 'x-forwarded-for': address } });

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    a = await createTestApp('postgres', env, { testDb: db, clock });
    b = await createTestApp('postgres', env, { testDb: db, clock });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await db.drop();
  });

  test('1 a minute per phone: of 10 requests at once spread over both, exactly one sends', async () => {
    const phone = '+8613500000001';
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => send(i % 2 ? a : b, phone, `198.51.100.${i + 1}`)));
    expect(answers.filter((r) => r.status === 202)).toHaveLength(1);
    const refused = answers.filter((r) => r.status === 429);
    expect(refused).toHaveLength(9);
    for (const r of refused) {
      expect(r.body).toEqual({ error: 'too many codes requested; try again later' });
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  });

  test('10 a day per phone, whichever replica is asked', async () => {
    const phone = '+8613500000002';
    for (let i = 0; i < 10; i++) {
      expect((await send(i % 2 ? a : b, phone, `198.51.100.${100 + i}`)).status).toBe(202);
      clock.advance(MINUTE);
    }
    expect((await send(a, phone, '198.51.100.200')).status).toBe(429);
    expect((await send(b, phone, '198.51.100.201')).status).toBe(429);
  });

  test('20 an hour per address: 30 numbers at once from one address over both replicas, exactly 20 sent', async () => {
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => send(i % 2 ? a : b, `+86135100000${String(i).padStart(2, '0')}`, '203.0.113.9')),
    );
    expect(answers.filter((r) => r.status === 202)).toHaveLength(20);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(10);
    // Another address is not affected.
    expect((await send(b, '+8613510000099', '203.0.113.10')).status).toBe(202);
    clock.advance(60 * MINUTE);
    expect((await send(a, '+8613510000098', '203.0.113.9')).status).toBe(202);
  });
});

/**
 * Phone codes in the built binary: `cpd serve` on a loopback PUBLIC_URL writes the code to its log
 * (SMS_PROVIDER=log, the default there), and with SMS_PROVIDER=aliyun it signs a real SendSms to a
 * fake Dysmsapi; either way the code read back signs in over HTTP with the session cookie.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { TEST_SECRET } from '../../support/app';
import { type RunningBinary, startBinary } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { waitFor } from '../../support/wait';
import { startFakeAliyunSms } from './fakes/aliyun-sms';

async function call(server: RunningBinary, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

describe('phone codes in the binary', () => {
  const fake = startFakeAliyunSms();
  let db: TestDatabase;
  let logged: RunningBinary;
  let aliyun: RunningBinary;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.url!, SECRET_KEY: TEST_SECRET };
    [logged, aliyun] = await Promise.all([startBinary({ env }), startBinary({ env: { ...env, ...fake.env() } })]);
  }, 180_000);
  afterAll(async () => {
    await Promise.all([logged?.stop(), aliyun?.stop()]);
    await db?.drop();
    fake.stop();
  });

  test('SMS_PROVIDER=log (the loopback default): the code is in the log, and it signs up', async () => {
    const phone = '+8613400000001';
    expect((await call(logged, '/api/auth/phone/code', { phone, purpose: 'register' })).status).toBe(202);
    const line = await waitFor(
      () =>
        logged
          .logs()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l))
          .find((l) => l.phone === phone && l.sms_code),
      'the log provider’s line',
    );
    expect(line.msg).toContain('SMS NOT SENT (SMS_PROVIDER=log)');
    const res = await call(logged, '/api/auth/phone/login', { phone, code: line.sms_code });
    expect(res.status).toBe(201);
    expect(res.headers.get('set-cookie')).toContain(`cpd_session=${res.body.token}`);
    const me = await fetch(`${logged.url}/api/auth/me`, { headers: { authorization: `Bearer ${res.body.token}` } });
    expect(await me.json()).toMatchObject({ email: null, phone });
    // One code a minute per number holds across the two processes: the other one refuses it.
    const again = await call(aliyun, '/api/auth/phone/code', { phone, purpose: 'login' });
    expect(again.status).toBe(429);
    expect(Number(again.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  test('SMS_PROVIDER=aliyun: a signed SendSms reaches the provider, and its code signs in on the other process', async () => {
    const phone = '+8613400000002';
    expect((await call(aliyun, '/api/auth/phone/code', { phone, purpose: 'register' })).status).toBe(202);
    const message = fake.messages.find((m) => m.phoneNumbers === '13400000002')!;
    expect(fake.rejected).toEqual([]);
    // Codes live in the shared database: any replica takes them.
    const res = await call(logged, '/api/auth/phone/login', { phone, code: message.templateParam.code });
    expect(res.status).toBe(201);
    expect(aliyun.logs()).not.toContain(fake.account.accessKeySecret);
  });
});

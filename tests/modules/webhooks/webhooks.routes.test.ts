/**
 * /api/webhooks: create (secret shown once), list, read, change, delete; 400 {error} for bad
 * input, which changes nothing; another account's endpoint is 404; sessions only; SSRF refusals
 * when WEBHOOK_ALLOW_PRIVATE is off.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { isRefusedAddress } from '../../../src/modules/webhooks/webhooks.addresses';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';

/** A public address literal: no DNS needed, and nothing is sent to it (no event happens). */
const PUBLIC_URL = 'https://93.184.215.14/hooks/cpd';

describe('webhook endpoints API (postgres)', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  let other: Awaited<ReturnType<typeof makeUser>>;
  const api = (method: string, path: string, body?: unknown, token = user.token) => t.request(method, path, { token, body });

  beforeAll(async () => {
    t = await createTestApp('postgres', {}, { build: { webhooks: { manual: true } } });
    user = await makeUser(t);
    other = await makeUser(t);
  });
  afterAll(() => t.close());

  test('create answers 201 with the secret once; list and read never show it; PATCH changes; DELETE is 204', async () => {
    const created = await api('POST', '/api/webhooks', { url: PUBLIC_URL, events: ['payment.paid', 'invoice.issued', 'payment.paid'] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      url: PUBLIC_URL,
      events: ['payment.paid', 'invoice.issued'],
      enabled: true,
      disabled_reason: null,
    });
    expect(created.body.secret).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
    const { secret, ...shown } = created.body;
    expect((await api('GET', '/api/webhooks')).body).toEqual({ webhooks: [shown] });
    expect((await api('GET', `/api/webhooks/${shown.id}`)).body).toEqual(shown);
    expect(JSON.stringify((await api('GET', '/api/webhooks')).body)).not.toContain(secret);

    const patched = await api('PATCH', `/api/webhooks/${shown.id}`, { events: ['balance.low'], enabled: false });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...shown, events: ['balance.low'], enabled: false });
    expect((await api('PATCH', `/api/webhooks/${shown.id}`, { enabled: true })).body.enabled).toBe(true);

    expect((await api('GET', `/api/webhooks/${shown.id}/deliveries`)).body).toEqual({ deliveries: [], next_cursor: null });
    const deleted = await api('DELETE', `/api/webhooks/${shown.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expect((await api('GET', `/api/webhooks/${shown.id}`)).status).toBe(404);
  });

  test('bad input is 400 {error} and changes nothing', async () => {
    const kept = (await api('POST', '/api/webhooks', { url: PUBLIC_URL, events: ['payment.paid'] })).body;
    const before = (await api('GET', '/api/webhooks')).body;
    for (const body of [
      {},
      { url: PUBLIC_URL },
      { events: ['payment.paid'] },
      { url: PUBLIC_URL, events: [] },
      { url: PUBLIC_URL, events: ['payment.nope'] },
      { url: PUBLIC_URL, events: 'payment.paid' },
      { url: 'not a url', events: ['payment.paid'] },
      { url: 'ftp://93.184.215.14/x', events: ['payment.paid'] },
      { url: 'http://93.184.215.14/x', events: ['payment.paid'] },
      { url: 'https://user:pass@93.184.215.14/x', events: ['payment.paid'] },
      { url: `https://93.184.215.14/${'x'.repeat(2100)}`, events: ['payment.paid'] },
      { url: 'https://no-such-host.invalid/x', events: ['payment.paid'] },
      { url: 42, events: ['payment.paid'] },
    ]) {
      const r = await api('POST', '/api/webhooks', body);
      expect({ body, status: r.status }).toEqual({ body, status: 400 });
      expect(typeof r.body.error).toBe('string');
    }
    for (const body of [{ events: [] }, { events: ['x'] }, { url: 'http://93.184.215.14/' }, { enabled: 'yes' }]) {
      const r = await api('PATCH', `/api/webhooks/${kept.id}`, body);
      expect({ body, status: r.status }).toEqual({ body, status: 400 });
      expect(typeof r.body.error).toBe('string');
    }
    expect((await api('GET', `/api/webhooks/${kept.id}/deliveries?limit=0`)).status).toBe(400);
    expect((await api('GET', `/api/webhooks/${kept.id}/deliveries?cursor=zzz`)).status).toBe(400);
    expect((await api('GET', '/api/webhooks')).body).toEqual(before);
  });

  test('another account sees 404; no credential is 401; an API key may not manage webhooks', async () => {
    const mine = (await api('POST', '/api/webhooks', { url: PUBLIC_URL, events: ['payment.paid'] })).body;
    for (const [method, path, body] of [
      ['GET', `/api/webhooks/${mine.id}`],
      ['PATCH', `/api/webhooks/${mine.id}`, { enabled: false }],
      ['DELETE', `/api/webhooks/${mine.id}`],
      ['GET', `/api/webhooks/${mine.id}/deliveries`],
      ['POST', `/api/webhooks/${mine.id}/deliveries/dlv_x/retry`],
    ] as const) {
      const r = await api(method, path, body, other.token);
      expect({ path, method, status: r.status }).toEqual({ path, method, status: 404 });
    }
    expect((await api('GET', `/api/webhooks/${mine.id}`)).body.enabled).toBe(true);
    expect((await t.request('GET', '/api/webhooks')).status).toBe(401);
    const key = await t.services.accounts.createApiKey(user.id, { name: 'script' });
    expect((await t.request('GET', '/api/webhooks', { token: key.key })).status).toBe(401);
    expect((await api('POST', `/api/webhooks/${mine.id}/deliveries/dlv_none/retry`)).status).toBe(404);
  });

  test('SSRF: URLs reaching loopback, private, link-local, CGNAT or unspecified addresses are refused', async () => {
    for (const url of [
      'https://127.0.0.1/x',
      'https://127.1.2.3/x',
      'https://localhost/x',
      'https://10.0.0.1/x',
      'https://172.16.0.1/x',
      'https://172.31.255.254/x',
      'https://192.168.1.1/x',
      'https://169.254.169.254/latest/meta-data',
      'https://100.64.0.1/x',
      'https://0.0.0.0/x',
      'https://[::1]/x',
      'https://[::]/x',
      'https://[fe80::1]/x',
      'https://[fd00::1]/x',
      'https://[fc00::1]/x',
      'https://[::ffff:127.0.0.1]/x',
      'https://[::ffff:10.0.0.1]/x',
      'http://127.0.0.1:9/x',
    ]) {
      const r = await api('POST', '/api/webhooks', { url, events: ['payment.paid'] });
      expect({ url, status: r.status }).toEqual({ url, status: 400 });
      expect(r.body.error).toMatch(/https|loopback, private or link-local/);
    }
    expect(isRefusedAddress('8.8.8.8')).toBe(false);
    expect(isRefusedAddress('2606:4700::1111')).toBe(false);
    expect(isRefusedAddress('172.32.0.1')).toBe(false);
    expect(isRefusedAddress('100.128.0.1')).toBe(false);
    expect(isRefusedAddress('172.20.1.1')).toBe(true);
    expect(isRefusedAddress('fe80::abcd')).toBe(true);
    expect(isRefusedAddress('not-an-address')).toBe(true);
  });

  test('at most 20 endpoints per account (409)', async () => {
    const fresh = await makeUser(t);
    for (let i = 0; i < 20; i++)
      expect((await api('POST', '/api/webhooks', { url: `${PUBLIC_URL}/${i}`, events: ['payment.paid'] }, fresh.token)).status).toBe(201);
    const over = await api('POST', '/api/webhooks', { url: PUBLIC_URL, events: ['payment.paid'] }, fresh.token);
    expect(over.status).toBe(409);
    expect(over.body.error).toContain('at most 20');
  });
});

describe('webhook endpoints with WEBHOOK_ALLOW_PRIVATE=true (postgres)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('postgres', { WEBHOOK_ALLOW_PRIVATE: 'true' }, { build: { webhooks: { manual: true } } });
  });
  afterAll(() => t.close());

  test('http and private addresses are accepted; other schemes still are not', async () => {
    const user = await makeUser(t);
    for (const url of ['http://127.0.0.1:8999/hook', 'https://localhost/hook', 'http://10.0.0.5/x'])
      expect((await t.request('POST', '/api/webhooks', { token: user.token, body: { url, events: ['payment.paid'] } })).status).toBe(201);
    expect(
      (await t.request('POST', '/api/webhooks', { token: user.token, body: { url: 'ftp://127.0.0.1/x', events: ['payment.paid'] } }))
        .status,
    ).toBe(400);
  });
});

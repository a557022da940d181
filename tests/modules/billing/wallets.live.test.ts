import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ConfigError, loadConfig } from '../../../src/config';
import { createTestApp, type TestApp } from '../../support/app';
import { makeUser } from '../../support/make';
import { startFakeAlipay } from './fakes/alipay';
import { startFakeWechat } from './fakes/wechat';
import { ledgerSumMicros } from './support';
import { manualClock } from '../../support/clock';

describe('chat_wallet and app_wallet in live mode against local WeChat Pay and Alipay (postgres)', () => {
  const wechat = startFakeWechat();
  const alipay = startFakeAlipay();
  const clock = manualClock();
  let t: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    t = await createTestApp('postgres', { SITE: 'cn', PAYMENT_MODE: 'live', ...wechat.env, ...alipay.env }, { clock });
    user = await makeUser(t);
  });
  afterAll(async () => {
    await t.close();
    wechat.stop();
    alipay.stop();
  });

  const create = async (provider: string, amount: number) => {
    const res = await t.request('POST', '/api/billing/payments', { token: user.token, body: { provider, amount, currency: 'CNY' } });
    expect(res.status).toBe(201);
    return res.body as { id: string; qr_code_url: string };
  };
  const deliver = (provider: string, n: { body: string; headers: Record<string, string> }) =>
    t.request('POST', `/api/payments/webhooks/${provider}`, { body: n.body, headers: n.headers });
  const status = async (id: string) => (await t.request('GET', `/api/billing/payments/${id}`, { token: user.token })).body;
  const balance = () => t.services.billing.getBalanceMicros(user.id);

  test('WeChat Pay: the native order returns a code_url; its notification credits once', async () => {
    const p = await create('chat_wallet', 12.3);
    expect(p.qr_code_url).toMatch(/^weixin:\/\/wxpay\/bizpayurl\?pr=/);
    expect(wechat.orders.get(p.id)).toMatchObject({ total: 1230, currency: 'CNY', notify_url: 'http://localhost:8080/api/payments/webhooks/chat_wallet' });
    const before = await balance();
    const n = wechat.pay(p.id);
    const res = await deliver('chat_wallet', n);
    expect(res.status).toBe(204);
    await Promise.all([deliver('chat_wallet', n), deliver('chat_wallet', n)]); // WeChat Pay re-sends until acknowledged
    expect(await status(p.id)).toMatchObject({ status: 'paid', provider_reference: wechat.orders.get(p.id)!.transaction_id });
    expect(await balance()).toBe(before + 12_300_000n);
  });

  test('WeChat Pay: a bad signature or a tampered body is 400 and changes nothing', async () => {
    const p = await create('chat_wallet', 5);
    const n = wechat.pay(p.id);
    expect((await deliver('chat_wallet', { body: n.body, headers: { ...n.headers, 'wechatpay-signature': Buffer.from('x').toString('base64') } })).status).toBe(400);
    expect((await deliver('chat_wallet', { body: n.body.replace('"id":"', '"id":"0'), headers: n.headers })).status).toBe(400);
    const { 'wechatpay-signature': _dropped, ...unsigned } = n.headers;
    expect((await deliver('chat_wallet', { body: n.body, headers: unsigned })).status).toBe(400);
    expect((await status(p.id)).status).toBe('pending');
  });

  test('WeChat Pay: a lost notification is reconciled by polling (query by out_trade_no)', async () => {
    const p = await create('chat_wallet', 8);
    wechat.pay(p.id);
    clock.advance(11_000);
    const before = await balance();
    expect((await status(p.id)).status).toBe('paid');
    expect(await balance()).toBe(before + 8_000_000n);
  });

  test('WeChat Pay: a paid total that differs from the order is not credited; expiry closes the order', async () => {
    const p = await create('chat_wallet', 9);
    const before = await balance();
    expect((await deliver('chat_wallet', wechat.pay(p.id, 1))).status).toBe(204);
    expect((await status(p.id)).status).toBe('pending');
    const q = await create('chat_wallet', 10);
    clock.advance(30 * 60_000);
    expect((await status(q.id)).status).toBe('expired');
    expect(wechat.orders.get(q.id)!.trade_state).toBe('CLOSED');
    expect((await status(p.id)).status).toBe('expired'); // the mismatch stays recorded, never credited
    expect(await balance()).toBe(before);
  });

  test('Alipay: precreate returns a qr_code; the RSA2-signed notification credits once and is answered "success"', async () => {
    const p = await create('app_wallet', 66.6);
    expect(p.qr_code_url).toMatch(/^https:\/\/qr\.alipay\.com\//);
    expect(alipay.trades.get(p.id)).toMatchObject({ total_amount: '66.60' });
    const before = await balance();
    const n = alipay.pay(p.id);
    const res = await deliver('app_wallet', n);
    expect(res.status).toBe(200);
    expect(res.text).toBe('success');
    await Promise.all([deliver('app_wallet', n), deliver('app_wallet', n)]);
    expect(await status(p.id)).toMatchObject({ status: 'paid', provider_reference: alipay.trades.get(p.id)!.trade_no });
    expect(await balance()).toBe(before + 66_600_000n);
    expect(await ledgerSumMicros(t.ctx, user.id)).toBe(await balance());
  });

  test('Alipay: a forged notification is 400 and changes nothing', async () => {
    const p = await create('app_wallet', 20);
    const n = alipay.pay(p.id);
    expect((await deliver('app_wallet', { body: n.body.replace('total_amount=20.00', 'total_amount=2000.00'), headers: n.headers })).status).toBe(400);
    expect((await status(p.id)).status).toBe('pending');
  });

  test('Alipay: polling reconciles a lost notification; expiry closes a scanned trade and skips an unscanned one', async () => {
    const p = await create('app_wallet', 3);
    clock.advance(11_000);
    expect((await status(p.id)).status).toBe('pending'); // not scanned: Alipay does not know it yet
    alipay.pay(p.id);
    clock.advance(11_000);
    expect((await status(p.id)).status).toBe('paid');
    const scanned = await create('app_wallet', 4);
    const unscanned = await create('app_wallet', 5);
    alipay.scan(scanned.id);
    clock.advance(30 * 60_000);
    await t.services.billing.payments.sweep();
    expect(alipay.trades.get(scanned.id)!.status).toBe('TRADE_CLOSED');
    expect((await status(scanned.id)).status).toBe('expired');
    expect((await status(unscanned.id)).status).toBe('expired');
  });
});

describe('live-mode configuration', () => {
  const base = { DATA_DIR: '/tmp/cpd-config-test', PAYMENT_MODE: 'live' };
  const configError = (env: Record<string, string>) => {
    try {
      loadConfig({ ...base, ...env });
    } catch (err) {
      return err instanceof ConfigError ? err.variable : String(err);
    }
    return null;
  };

  test('each enabled provider needs its credentials, named in the error', () => {
    expect(configError({ SITE: 'intl' })).toBe('STRIPE_SECRET_KEY');
    expect(configError({ SITE: 'intl', STRIPE_SECRET_KEY: 'sk' })).toBe('STRIPE_WEBHOOK_SECRET');
    expect(configError({ SITE: 'intl', STRIPE_SECRET_KEY: 'sk', STRIPE_WEBHOOK_SECRET: 'wh', STRIPE_API_URL: 'ftp://x' })).toBe('STRIPE_API_URL');
    expect(configError({ SITE: 'intl', STRIPE_SECRET_KEY: 'sk', STRIPE_WEBHOOK_SECRET: 'wh' })).toBeNull();
    expect(configError({ SITE: 'cn', PAYMENT_PROVIDERS: 'app_wallet', ALIPAY_APP_ID: '1' })).toBe('ALIPAY_PRIVATE_KEY');
    expect(configError({ SITE: 'cn', PAYMENT_PROVIDERS: 'app_wallet', ALIPAY_APP_ID: '1', ALIPAY_PRIVATE_KEY: '-----BEGIN PRIVATE KEY-----\\nnope\\n-----END PRIVATE KEY-----' })).toBe('ALIPAY_PRIVATE_KEY');
    const wechat = startFakeWechat();
    try {
      expect(configError({ SITE: 'cn', PAYMENT_PROVIDERS: 'chat_wallet', ...wechat.env })).toBeNull();
      expect(configError({ SITE: 'cn', PAYMENT_PROVIDERS: 'chat_wallet', ...wechat.env, WECHAT_API_V3_KEY: 'short' })).toBe('WECHAT_API_V3_KEY');
      // PEM with literal \n (one-line env files) is accepted.
      expect(configError({ SITE: 'cn', PAYMENT_PROVIDERS: 'chat_wallet', ...wechat.env, WECHAT_PLATFORM_PUBLIC_KEY: wechat.env.WECHAT_PLATFORM_PUBLIC_KEY.replace(/\n/g, '\\n') })).toBeNull();
    } finally {
      wechat.stop();
    }
    // Sandbox mode needs nothing.
    expect(configError({ PAYMENT_MODE: 'sandbox', SITE: 'cn' })).toBeNull();
  });
});

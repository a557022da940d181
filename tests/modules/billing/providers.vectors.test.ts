/**
 * Our signing and verification code against the providers' own published examples
 * (tests/modules/billing/published-vectors.ts names the page of each): a reading of a provider's
 * rules that differs from the provider's by one byte fails here, whatever the fakes say.
 */
import { afterEach, describe, expect, setSystemTime, test } from 'bun:test';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { loadConfig } from '../../../src/config';
import { alipayProvider, alipaySigningString } from '../../../src/modules/billing/providers/alipay';
import { BadSignatureError } from '../../../src/modules/billing/providers/provider';
import { rsaSign, rsaVerify } from '../../../src/modules/billing/providers/rsa';
import { stripeProvider } from '../../../src/modules/billing/providers/stripe';
import { decryptResource, wechatAuthorization, wechatProvider, wechatRequestMessage } from '../../../src/modules/billing/providers/wechat';
import {
  ALIPAY_NOTIFICATION,
  ALIPAY_NOTIFY_PUBLIC_KEY,
  ALIPAY_REQUEST,
  STRIPE_WEBHOOK,
  WECHAT_AEAD_CERTIFICATE,
  WECHAT_AEAD_MESSAGE,
  WECHAT_API_V3_KEY,
  WECHAT_GET_REQUEST,
  WECHAT_POST_REQUEST,
  WECHAT_TEST_MERCHANT,
  WECHAT_VERIFIED_MESSAGE,
} from './published-vectors';

afterEach(() => setSystemTime());

/** A platform key of our own: WeChat Pay publishes no private key for its answers' signatures. */
const platform = generateKeyPairSync('rsa', { modulusLength: 2048 });
const platformPublicKey = platform.publicKey.export({ type: 'spki', format: 'pem' }).toString();
const platformPrivateKey = platform.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
/** An app key of our own for Alipay: only Alipay's side of the notification is published. */
const app = generateKeyPairSync('rsa', { modulusLength: 2048 });

/** The configuration `cpd serve` would read for live providers with these credentials. */
const cnConfig = loadConfig({
  SITE: 'cn',
  PUBLIC_URL: 'https://cn.example.com',
  PAYMENT_MODE: 'live',
  PAYMENT_PROVIDERS: 'chat_wallet,app_wallet',
  WECHAT_APP_ID: 'wxd678efh567hg6787',
  WECHAT_MCH_ID: WECHAT_TEST_MERCHANT.mchId,
  WECHAT_MCH_SERIAL_NO: WECHAT_TEST_MERCHANT.serialNo,
  WECHAT_MCH_PRIVATE_KEY: WECHAT_TEST_MERCHANT.privateKey,
  WECHAT_API_V3_KEY,
  WECHAT_PLATFORM_PUBLIC_KEY: platformPublicKey,
  ALIPAY_APP_ID: ALIPAY_NOTIFICATION.app_id!,
  ALIPAY_PRIVATE_KEY: app.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  ALIPAY_PUBLIC_KEY: ALIPAY_NOTIFY_PUBLIC_KEY,
});
const intlConfig = loadConfig({
  SITE: 'intl',
  PUBLIC_URL: 'https://intl.example.com',
  PAYMENT_MODE: 'live',
  STRIPE_SECRET_KEY: 'sk_test_vectors',
  STRIPE_WEBHOOK_SECRET: STRIPE_WEBHOOK.secret,
});

describe('Stripe webhooks: Stripe’s own fixed vector', () => {
  const stripe = stripeProvider(intlConfig.paymentCredentials.card!, intlConfig);
  const headers = (signature: string) => new Headers({ 'stripe-signature': signature });

  test('the published header verifies the published body, 100 s after it was signed', async () => {
    setSystemTime(new Date((STRIPE_WEBHOOK.timestamp + 100) * 1000));
    await stripe.verifyNotification(STRIPE_WEBHOOK.body, headers(STRIPE_WEBHOOK.header));
  });

  test('one byte more in the body, another secret, or the same header ten minutes later is refused', async () => {
    setSystemTime(new Date((STRIPE_WEBHOOK.timestamp + 100) * 1000));
    await expect(stripe.verifyNotification(`${STRIPE_WEBHOOK.body} `, headers(STRIPE_WEBHOOK.header))).rejects.toBeInstanceOf(BadSignatureError);
    const other = stripeProvider({ ...intlConfig.paymentCredentials.card!, webhookSecret: 'webhook_secreT' }, intlConfig);
    await expect(other.verifyNotification(STRIPE_WEBHOOK.body, headers(STRIPE_WEBHOOK.header))).rejects.toBeInstanceOf(BadSignatureError);
    setSystemTime(new Date((STRIPE_WEBHOOK.timestamp + 600) * 1000));
    await expect(stripe.verifyNotification(STRIPE_WEBHOOK.body, headers(STRIPE_WEBHOOK.header))).rejects.toBeInstanceOf(BadSignatureError);
  });
});

describe('WeChat Pay API v3: the published examples', () => {
  const creds = cnConfig.paymentCredentials.chatWallet!;
  const wechat = wechatProvider(creds, cnConfig);

  test('our request message is the published five-line message, byte for byte (GET with no body, POST with one)', () => {
    for (const r of [WECHAT_GET_REQUEST, WECHAT_POST_REQUEST])
      expect(wechatRequestMessage(r.method, r.pathAndQuery, r.timestamp, r.nonce, r.body)).toBe(r.message);
  });

  test('signed with the published test key, it is the published signature', () => {
    const r = WECHAT_GET_REQUEST;
    expect(rsaSign(wechatRequestMessage(r.method, r.pathAndQuery, r.timestamp, r.nonce, r.body), creds.mchPrivateKey)).toBe(r.signature);
  });

  test('our Authorization header has the published form, and its signature covers its own timestamp and nonce', () => {
    const r = WECHAT_GET_REQUEST;
    setSystemTime(new Date(Number(r.timestamp) * 1000));
    const header = wechatAuthorization(creds, r.method, r.pathAndQuery, r.body);
    const form =
      /^WECHATPAY2-SHA256-RSA2048 mchid="1900007291",nonce_str="([0-9a-f]{32})",signature="([A-Za-z0-9+/=]+)",timestamp="1554208460",serial_no="408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB"$/;
    const [, nonce, signature] = form.exec(header) ?? [];
    expect(nonce).toBeDefined();
    expect(signature).toBe(rsaSign(wechatRequestMessage(r.method, r.pathAndQuery, r.timestamp, nonce!, r.body), creds.mchPrivateKey));
  });

  test('a notification is verified over the published three-line message', async () => {
    const m = WECHAT_VERIFIED_MESSAGE;
    // Signed over the published bytes: it verifies only if our message is those bytes.
    const headers = new Headers({ 'wechatpay-timestamp': m.timestamp, 'wechatpay-nonce': m.nonce, 'wechatpay-signature': rsaSign(m.message, platformPrivateKey) });
    await wechat.verifyNotification(m.body, headers);
    await expect(wechat.verifyNotification(`${m.body}\n`, headers)).rejects.toBeInstanceOf(BadSignatureError);
    headers.set('wechatpay-nonce', m.nonce.toUpperCase());
    await expect(wechat.verifyNotification(m.body, headers)).rejects.toBeInstanceOf(BadSignatureError);
  });

  test('AEAD_AES_256_GCM resources decrypt as WeChat Pay’s SDK publishes them', () => {
    expect(decryptResource(WECHAT_API_V3_KEY, WECHAT_AEAD_MESSAGE.resource)).toBe(WECHAT_AEAD_MESSAGE.plaintext);
    const certificate = decryptResource(WECHAT_API_V3_KEY, WECHAT_AEAD_CERTIFICATE.resource);
    expect(new X509Certificate(certificate).serialNumber).toBe(WECHAT_AEAD_CERTIFICATE.serialNumber);
    // The associated data is authenticated: another one fails the tag.
    expect(() => decryptResource(WECHAT_API_V3_KEY, { ...WECHAT_AEAD_MESSAGE.resource, associated_data: 'transaction' })).toThrow();
  });
});

describe('Alipay RSA2: the published examples', () => {
  const alipay = alipayProvider(cnConfig.paymentCredentials.appWallet!, cnConfig);
  const form = (params: Record<string, string>) => new URLSearchParams(params).toString();

  test('our request signing string is the published one, byte for byte (sign_type included, sign not)', () => {
    expect(alipaySigningString({ ...ALIPAY_REQUEST.params, sign: 'dropped' })).toBe(ALIPAY_REQUEST.signingString);
  });

  test('a notification Alipay signed verifies as posted, form-encoded', async () => {
    expect(rsaVerify(alipaySigningString(ALIPAY_NOTIFICATION, ['sign', 'sign_type']), ALIPAY_NOTIFICATION.sign!, ALIPAY_NOTIFY_PUBLIC_KEY)).toBe(true);
    await alipay.verifyNotification(form(ALIPAY_NOTIFICATION), new Headers());
  });

  test('the same notification with one value changed is refused', async () => {
    await expect(alipay.verifyNotification(form({ ...ALIPAY_NOTIFICATION, total_amount: '100.00' }), new Headers())).rejects.toBeInstanceOf(BadSignatureError);
  });
});

/**
 * chat_wallet in live mode: WeChat Pay Native payments, API v3. Requests are signed with the
 * merchant key (WECHATPAY2-SHA256-RSA2048 over "METHOD\nPATH\nTS\nNONCE\nBODY\n"); notifications
 * are verified with the platform public key over "TS\nNONCE\nBODY\n" and their resource is
 * decrypted with AES-256-GCM under the APIv3 key. Written against the HTTP API directly: there is
 * no maintained official Node SDK for v3.
 */
import type { Config, PaymentCredentials } from '../../../config';
import { nodeCrypto, randomBytes } from '../../../platform/crypto';
import { fromMinorUnits, toMinorUnits } from '../money';
import { BadSignatureError, type PaymentProvider, type ProviderReport } from './provider';
import { chinaTime, rsaSign, rsaVerify } from './rsa';
import { PROVIDER_NAMES } from './sandbox';

type WechatCredentials = NonNullable<PaymentCredentials['chatWallet']>;

interface WechatTransaction {
  out_trade_no: string;
  transaction_id?: string;
  trade_state: string;
  amount?: { total?: number; payer_total?: number; currency?: string };
}

interface WechatNotification {
  event_type: string;
  resource: { algorithm: string; ciphertext: string; associated_data?: string; nonce: string };
}

export function wechatAuthorization(creds: WechatCredentials, method: string, pathAndQuery: string, body: string): string {
  const timestamp = Math.floor(Date.now() / 1000).toString();
  const nonce = randomBytes(16).toString('hex');
  const signature = rsaSign(`${method}\n${pathAndQuery}\n${timestamp}\n${nonce}\n${body}\n`, creds.mchPrivateKey);
  return `WECHATPAY2-SHA256-RSA2048 mchid="${creds.mchId}",nonce_str="${nonce}",signature="${signature}",timestamp="${timestamp}",serial_no="${creds.mchSerialNo}"`;
}

/** AEAD_AES_256_GCM: the ciphertext is base64(encrypted ‖ 16-byte tag). */
export function decryptResource(apiV3Key: string, resource: WechatNotification['resource']): string {
  const data = Buffer.from(resource.ciphertext, 'base64');
  const decipher = nodeCrypto().createDecipheriv('aes-256-gcm', Buffer.from(apiV3Key, 'utf8'), Buffer.from(resource.nonce, 'utf8'));
  decipher.setAuthTag(data.subarray(data.length - 16));
  decipher.setAAD(Buffer.from(resource.associated_data ?? '', 'utf8'));
  return Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]).toString('utf8');
}

function transactionReport(t: WechatTransaction): ProviderReport {
  const base = {
    paymentId: t.out_trade_no,
    providerReference: t.transaction_id,
    amountMicros: t.amount?.total === undefined ? undefined : fromMinorUnits(t.amount.total),
    currency: t.amount?.currency,
  };
  switch (t.trade_state) {
    case 'SUCCESS':
      return { ...base, status: 'paid' };
    case 'CLOSED':
    case 'REVOKED':
      return { ...base, status: 'expired' };
    case 'PAYERROR':
      return { ...base, status: 'failed' };
    default: // NOTPAY, USERPAYING
      return { ...base, status: 'pending' };
  }
}

export function wechatProvider(creds: WechatCredentials, config: Config): PaymentProvider {
  async function call(method: 'GET' | 'POST', pathAndQuery: string, payload?: unknown): Promise<{ status: number; json: any }> {
    const body = payload === undefined ? '' : JSON.stringify(payload);
    const res = await fetch(`${creds.apiUrl}${pathAndQuery}`, {
      method,
      headers: {
        authorization: wechatAuthorization(creds, method, pathAndQuery, body),
        accept: 'application/json',
        ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: payload === undefined ? undefined : body,
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  }
  const outTradeNoPath = (id: string) => `/v3/pay/transactions/out-trade-no/${encodeURIComponent(id)}`;

  return {
    id: 'chat_wallet',
    name: PROVIDER_NAMES.chat_wallet,
    async createOrder(order) {
      const { date, time } = chinaTime(order.expiresAt);
      const res = await call('POST', '/v3/pay/transactions/native', {
        appid: creds.appId,
        mchid: creds.mchId,
        description: order.description,
        out_trade_no: order.paymentId,
        time_expire: `${date}T${time}+08:00`,
        notify_url: `${config.publicUrl}/api/payments/webhooks/chat_wallet`,
        amount: { total: toMinorUnits(order.amountMicros), currency: order.currency },
      });
      if (res.status !== 200 || typeof res.json?.code_url !== 'string') throw new Error(`WeChat Pay native order failed: ${res.status} ${res.json?.code ?? ''}`);
      return { qrCodeUrl: res.json.code_url, expiresAt: order.expiresAt };
    },
    async verifyNotification(rawBody, headers) {
      const timestamp = headers.get('wechatpay-timestamp');
      const nonce = headers.get('wechatpay-nonce');
      const signature = headers.get('wechatpay-signature');
      if (!timestamp || !nonce || !signature || !rsaVerify(`${timestamp}\n${nonce}\n${rawBody}\n`, signature, creds.platformPublicKey))
        throw new BadSignatureError('bad WeChat Pay signature');
    },
    async parseNotification(rawBody) {
      const n = JSON.parse(rawBody) as WechatNotification;
      if (n.resource?.algorithm !== 'AEAD_AES_256_GCM') return null;
      const report = transactionReport(JSON.parse(decryptResource(creds.apiV3Key, n.resource)) as WechatTransaction);
      return n.event_type === 'TRANSACTION.SUCCESS' || report.status !== 'pending' ? report : null;
    },
    async queryOrder(order) {
      const res = await call('GET', `${outTradeNoPath(order.id)}?mchid=${encodeURIComponent(creds.mchId)}`);
      if (res.status === 404) return { paymentId: order.id, status: 'pending' }; // ORDER_NOT_EXIST: never scanned
      if (res.status !== 200) throw new Error(`WeChat Pay order query failed: ${res.status} ${res.json?.code ?? ''}`);
      return transactionReport(res.json as WechatTransaction);
    },
    async closeOrder(order) {
      const res = await call('POST', `${outTradeNoPath(order.id)}/close`, { mchid: creds.mchId });
      if (res.status !== 204 && res.status !== 200) throw new Error(`WeChat Pay close failed: ${res.status} ${res.json?.code ?? ''}`);
    },
    // v3: a 200/204 without a body acknowledges the notification.
    acknowledge: () => new Response(null, { status: 204 }),
  };
}

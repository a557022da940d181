/**
 * chat_wallet in live mode: WeChat Pay Native payments, API v3. Requests are signed with the
 * merchant key (WECHATPAY2-SHA256-RSA2048 over "METHOD\nPATH\nTS\nNONCE\nBODY\n"); notifications
 * are verified with the platform public key over "TS\nNONCE\nBODY\n" and their resource is
 * decrypted with AES-256-GCM under the APIv3 key. Refunds: /v3/refund/domestic/refunds with our
 * refund id as out_refund_no (WeChat Pay refunds one out_refund_no once), and REFUND.* notifications.
 * Written against the HTTP API directly: there is no maintained official Node SDK for v3
 * (docs/decisions/0007-wechat-pay-client.md).
 */
import type { Config, PaymentCredentials } from '../../../config';
import { nodeCrypto, randomBytes } from '../../../platform/crypto';
import { fromMinorUnits, toMinorUnits } from '../money';
import { BadSignatureError, type PaymentProvider, type ProviderReport, type RefundOutcome, RefundRefusedError } from './provider';
import { chinaTime, rsaSign, rsaVerify } from './rsa';
import { PROVIDER_NAMES } from './sandbox';

type WechatCredentials = NonNullable<PaymentCredentials['chatWallet']>;

interface WechatTransaction {
  out_trade_no: string;
  transaction_id?: string;
  trade_state: string;
  amount?: { total?: number; payer_total?: number; currency?: string };
}

/** A refund as the refund API answers it (`status`) and as REFUND.* notifications carry it (`refund_status`). */
interface WechatRefund {
  out_trade_no: string;
  out_refund_no: string;
  refund_id: string;
  status?: string;
  refund_status?: string;
  amount: { refund: number; total: number; currency?: string };
}

interface WechatNotification {
  event_type: string;
  resource: { algorithm: string; ciphertext: string; associated_data?: string; nonce: string };
}

/** What a request's signature covers: five lines, each ended by \n, the body's too (empty for a GET). */
export const wechatRequestMessage = (method: string, pathAndQuery: string, timestamp: string, nonce: string, body: string) =>
  `${method}\n${pathAndQuery}\n${timestamp}\n${nonce}\n${body}\n`;

export function wechatAuthorization(creds: WechatCredentials, method: string, pathAndQuery: string, body: string): string {
  const timestamp = Math.floor(Date.now() / 1000).toString();
  const nonce = randomBytes(16).toString('hex');
  const signature = rsaSign(wechatRequestMessage(method, pathAndQuery, timestamp, nonce, body), creds.mchPrivateKey);
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
    case 'REFUND': // paid, then (partly) refunded: the refunds are applied on their own
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

/**
 * SUCCESS: returned; CLOSED: closed without refunding; PROCESSING and ABNORMAL (the payer's
 * account refused it, the merchant re-sends it elsewhere at WeChat Pay) are money still owed.
 */
function refundOutcome(r: WechatRefund): RefundOutcome {
  const status = r.status ?? r.refund_status;
  if (status === 'SUCCESS') return { status: 'succeeded', providerRefundId: r.refund_id };
  if (status === 'CLOSED') return { status: 'failed', providerRefundId: r.refund_id, failure: 'CLOSED' };
  return { status: 'pending', providerRefundId: r.refund_id };
}

/** WeChat Pay allows a refund reason of at most 80 characters. */
const WECHAT_REASON_MAX = 80;

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
      const resource = JSON.parse(decryptResource(creds.apiV3Key, n.resource));
      if (n.event_type?.startsWith('REFUND.')) {
        const r = resource as WechatRefund;
        const { status } = refundOutcome(r);
        return {
          kind: 'refunds',
          refunds: [{ paymentId: r.out_trade_no, kind: 'refund', providerRefundId: r.refund_id, refundId: r.out_refund_no, amountMicros: fromMinorUnits(r.amount.refund), status }],
        };
      }
      const report = transactionReport(resource as WechatTransaction);
      return n.event_type === 'TRANSACTION.SUCCESS' || report.status !== 'pending' ? { kind: 'payment', report } : null;
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
    async refund(request) {
      const res = await call('POST', '/v3/refund/domestic/refunds', {
        out_trade_no: request.paymentId,
        out_refund_no: request.refundId,
        reason: request.reason.slice(0, WECHAT_REASON_MAX),
        notify_url: `${config.publicUrl}/api/payments/webhooks/chat_wallet`,
        amount: { refund: toMinorUnits(request.amountMicros), total: toMinorUnits(request.paymentAmountMicros), currency: request.currency },
      });
      if (res.status === 200) return refundOutcome(res.json as WechatRefund);
      // 4xx is WeChat Pay's answer (NOT_ENOUGH, INVALID_REQUEST, …): nothing refunded; 429 and 5xx: unknown, asked again later.
      if (res.status >= 400 && res.status < 500 && res.status !== 429) throw new RefundRefusedError(`${res.json?.code ?? res.status}: ${res.json?.message ?? ''}`.trim());
      throw new Error(`WeChat Pay refund failed: ${res.status} ${res.json?.code ?? ''}`);
    },
    async queryRefund(request) {
      const res = await call('GET', `/v3/refund/domestic/refunds/${encodeURIComponent(request.refundId)}`);
      if (res.status === 404) return null; // RESOURCE_NOT_EXISTS: never made
      if (res.status !== 200) throw new Error(`WeChat Pay refund query failed: ${res.status} ${res.json?.code ?? ''}`);
      return refundOutcome(res.json as WechatRefund);
    },
  };
}

/**
 * app_wallet in live mode: Alipay face-to-face QR payments (alipay.trade.precreate / query /
 * close) on the OpenAPI gateway, RSA2 signatures both ways. Hand-written rather than the
 * `alipay-sdk` package: the protocol is one signed form POST, and the SDK's HTTP stack adds weight
 * to the single binary for nothing we need.
 */
import type { Config, PaymentCredentials } from '../../../config';
import { decimalStringToMicros, toDecimalString } from '../money';
import { BadSignatureError, type PaymentProvider, type ProviderReport } from './provider';
import { chinaTime, rsaSign, rsaVerify } from './rsa';
import { PROVIDER_NAMES } from './sandbox';

type AlipayCredentials = NonNullable<PaymentCredentials['appWallet']>;

/** The string Alipay signs: every parameter but sign (and sign_type for notifications), sorted, `k=v` joined by `&`. */
export function alipaySigningString(params: Record<string, string>, exclude: string[] = ['sign']): string {
  return Object.keys(params)
    .filter((k) => !exclude.includes(k) && params[k] !== '')
    .sort()
    .map((k) => `${k}=${params[k]}`)
    .join('&');
}

/**
 * The raw JSON text of `<method>_response` inside a gateway answer: Alipay signs those exact bytes,
 * so it is cut from the body rather than re-serialised.
 */
export function alipayResponseNode(body: string, node: string): string | null {
  const start = body.indexOf(`"${node}":`);
  const end = body.lastIndexOf(',"sign"');
  if (start === -1 || end === -1 || end < start) return null;
  return body.slice(start + node.length + 3, end).trim();
}

function tradeReport(paymentId: string, r: { trade_status?: string; trade_no?: string; total_amount?: string }): ProviderReport {
  const base = {
    paymentId,
    providerReference: r.trade_no,
    amountMicros: r.total_amount === undefined ? undefined : decimalStringToMicros(r.total_amount) ?? undefined,
    currency: 'CNY',
  };
  switch (r.trade_status) {
    case 'TRADE_SUCCESS':
    case 'TRADE_FINISHED':
      return { ...base, status: 'paid' };
    case 'TRADE_CLOSED':
      return { ...base, status: 'expired' };
    default: // WAIT_BUYER_PAY
      return { ...base, status: 'pending' };
  }
}

export function alipayProvider(creds: AlipayCredentials, config: Config): PaymentProvider {
  async function call(method: string, bizContent: Record<string, string>, extra: Record<string, string> = {}): Promise<Record<string, string>> {
    const { date, time } = chinaTime(new Date());
    const params: Record<string, string> = {
      app_id: creds.appId,
      method,
      format: 'JSON',
      charset: 'utf-8',
      sign_type: 'RSA2',
      timestamp: `${date} ${time}`,
      version: '1.0',
      biz_content: JSON.stringify(bizContent),
      ...extra,
    };
    params.sign = rsaSign(alipaySigningString(params), creds.privateKey);
    const res = await fetch(creds.gatewayUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded;charset=utf-8' },
      body: new URLSearchParams(params).toString(),
      signal: AbortSignal.timeout(15_000),
    });
    const body = await res.text();
    const nodeName = `${method.replaceAll('.', '_')}_response`;
    const node = alipayResponseNode(body, nodeName);
    const { sign } = JSON.parse(body) as { sign?: string };
    if (!node || !sign || !rsaVerify(node, sign, creds.alipayPublicKey)) throw new Error(`Alipay ${method}: response signature not valid (HTTP ${res.status})`);
    return JSON.parse(node) as Record<string, string>;
  }

  return {
    id: 'app_wallet',
    name: PROVIDER_NAMES.app_wallet,
    async createOrder(order) {
      const { date, time } = chinaTime(order.expiresAt);
      const r = await call(
        'alipay.trade.precreate',
        { out_trade_no: order.paymentId, total_amount: toDecimalString(order.amountMicros), subject: order.description, time_expire: `${date} ${time}` },
        { notify_url: `${config.publicUrl}/api/payments/webhooks/app_wallet` },
      );
      if (r.code !== '10000' || !r.qr_code) throw new Error(`Alipay precreate failed: ${r.code} ${r.sub_code ?? ''}`);
      return { qrCodeUrl: r.qr_code, expiresAt: order.expiresAt };
    },
    async verifyNotification(rawBody) {
      const params = Object.fromEntries(new URLSearchParams(rawBody));
      if (!params.sign || params.app_id !== creds.appId || !rsaVerify(alipaySigningString(params, ['sign', 'sign_type']), params.sign, creds.alipayPublicKey))
        throw new BadSignatureError('bad Alipay signature');
    },
    async parseNotification(rawBody) {
      const params = Object.fromEntries(new URLSearchParams(rawBody));
      return params.out_trade_no ? tradeReport(params.out_trade_no, params) : null;
    },
    async queryOrder(order) {
      const r = await call('alipay.trade.query', { out_trade_no: order.id });
      if (r.code === '40004' && r.sub_code === 'ACQ.TRADE_NOT_EXIST') return { paymentId: order.id, status: 'pending' }; // not scanned yet
      if (r.code !== '10000') throw new Error(`Alipay query failed: ${r.code} ${r.sub_code ?? ''}`);
      return tradeReport(order.id, r);
    },
    async closeOrder(order) {
      const r = await call('alipay.trade.close', { out_trade_no: order.id });
      // Not created at Alipay yet (never scanned) or already closed: nothing to close.
      if (r.code !== '10000' && r.sub_code !== 'ACQ.TRADE_NOT_EXIST' && r.sub_code !== 'ACQ.TRADE_STATUS_ERROR')
        throw new Error(`Alipay close failed: ${r.code} ${r.sub_code ?? ''}`);
    },
    acknowledge: () => new Response('success', { headers: { 'content-type': 'text/plain; charset=utf-8' } }),
  };
}

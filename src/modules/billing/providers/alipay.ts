/**
 * app_wallet in live mode: Alipay face-to-face QR payments (alipay.trade.precreate / query /
 * close) on the OpenAPI gateway, RSA2 signatures both ways. Refunds: alipay.trade.refund with our
 * refund id as out_request_no (Alipay refunds one out_request_no once), confirmed with
 * alipay.trade.fastpay.refund.query. Hand-written rather than the `alipay-sdk` package: the
 * protocol is one signed form POST, and the SDK's HTTP stack adds weight to the single binary for
 * nothing we need (docs/decisions/0008-alipay-client.md).
 */
import type { Config, PaymentCredentials } from '../../../config';
import { decimalStringToMicros, toDecimalString } from '../money';
import { BadSignatureError, type PaymentProvider, type ProviderReport, type RefundOutcome, RefundRefusedError } from './provider';
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

/** Alipay has no refund id of its own: a refund is its trade and the out_request_no it was asked with. */
const alipayRefundId = (tradeNo: string, outRequestNo: string) => `${tradeNo}:${outRequestNo}`;

/** Alipay allows a refund reason of at most 256 characters. */
const ALIPAY_REASON_MAX = 256;

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

  /**
   * One refund of a trade, as alipay.trade.fastpay.refund.query answers it: found with its amount
   * (refund_status REFUND_SUCCESS, or absent, which older merchants get for a success), or null
   * when Alipay has no such refund.
   */
  async function queryRefund(paymentId: string, outRequestNo: string): Promise<(RefundOutcome & { amountMicros: bigint }) | null> {
    const r = await call('alipay.trade.fastpay.refund.query', { out_trade_no: paymentId, out_request_no: outRequestNo });
    if (r.code !== '10000') throw new Error(`Alipay refund query failed: ${r.code} ${r.sub_code ?? ''}`);
    const amountMicros = r.refund_amount ? decimalStringToMicros(r.refund_amount) : null;
    if (amountMicros === null) return null;
    const done = (r.refund_status ?? 'REFUND_SUCCESS') === 'REFUND_SUCCESS';
    return { status: done ? 'succeeded' : 'pending', providerRefundId: alipayRefundId(r.trade_no ?? '', outRequestNo), amountMicros };
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
      if (!params.out_trade_no) return null;
      // A refund's notice names it (out_biz_no) but carries only the trade's total refunded
      // (refund_fee): the amount of this one refund is asked of Alipay.
      if (params.out_biz_no && params.refund_fee) {
        const found = await queryRefund(params.out_trade_no, params.out_biz_no);
        if (!found) throw new Error(`Alipay notified refund ${params.out_biz_no} that its refund query does not know`);
        const report = {
          paymentId: params.out_trade_no,
          kind: 'refund' as const,
          providerRefundId: found.providerRefundId!,
          refundId: params.out_biz_no,
          amountMicros: found.amountMicros,
          currency: 'CNY',
          status: found.status,
        };
        return { kind: 'refunds', refunds: [report] };
      }
      return { kind: 'payment', report: tradeReport(params.out_trade_no, params) };
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
    async refund(request) {
      const r = await call('alipay.trade.refund', {
        out_trade_no: request.paymentId,
        refund_amount: toDecimalString(request.amountMicros),
        out_request_no: request.refundId,
        refund_reason: request.reason.slice(0, ALIPAY_REASON_MAX),
      });
      if (r.code === '10000') {
        // fund_change N: no money moved by this call (a repeat of a refund already made): ask which.
        if (r.fund_change === 'Y') return { status: 'succeeded', providerRefundId: alipayRefundId(r.trade_no ?? '', request.refundId) };
        return (await queryRefund(request.paymentId, request.refundId)) ?? { status: 'pending' };
      }
      // 40004 is Alipay's refusal (balance, status, amount); 20000 and ACQ.SYSTEM_ERROR: unknown, asked again later.
      if (r.code === '40004' && r.sub_code !== 'ACQ.SYSTEM_ERROR') throw new RefundRefusedError(`${r.sub_code ?? r.code}: ${r.sub_msg ?? ''}`.trim());
      throw new Error(`Alipay refund failed: ${r.code} ${r.sub_code ?? ''}`);
    },
    queryRefund: (request) => queryRefund(request.paymentId, request.refundId),
  };
}

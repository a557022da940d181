/**
 * A local Alipay OpenAPI gateway (alipay.trade.precreate / query / close / refund /
 * fastpay.refund.query): checks our RSA2 request signatures with the app public key, signs
 * responses and notifications with the Alipay key, as Alipay does (sorted k=v&… for notifications;
 * the raw `<method>_response` JSON for responses). A refund is made once per out_request_no; its
 * notification carries the trade's total refunded (refund_fee), not the refund's own amount.
 */
import { createSign, createVerify, randomBytes } from 'node:crypto';
import { rsaKeyPair } from './keys';

interface Trade {
  out_trade_no: string;
  total_amount: string;
  status: 'CREATED' | 'WAIT_BUYER_PAY' | 'TRADE_SUCCESS' | 'TRADE_CLOSED';
  trade_no?: string;
  /** Refunds by out_request_no, in fen. */
  refunds: Map<string, number>;
}

const fen = (amount: string) => Math.round(Number(amount) * 100);
const yuan = (f: number) => (f / 100).toFixed(2);

const signingString = (params: Record<string, string>, exclude: string[]) =>
  Object.keys(params)
    .filter((k) => !exclude.includes(k) && params[k] !== '')
    .sort()
    .map((k) => `${k}=${params[k]}`)
    .join('&');

export function startFakeAlipay() {
  const app = rsaKeyPair();
  const alipay = rsaKeyPair();
  const appId = '2021000000000001';
  const trades = new Map<string, Trade>();
  const sign = (text: string) => createSign('RSA-SHA256').update(text).sign(alipay.privateKey, 'base64');

  function answer(method: string, node: Record<string, unknown>) {
    const nodeJson = JSON.stringify(node);
    const key = `${method.replaceAll('.', '_')}_response`;
    return new Response(`{"${key}":${nodeJson},"sign":"${sign(nodeJson)}"}`, { headers: { 'content-type': 'text/html;charset=utf-8' } });
  }
  const notExist = { code: '40004', msg: 'Business Failed', sub_code: 'ACQ.TRADE_NOT_EXIST', sub_msg: '交易不存在' };
  /** How the next refunds are answered: refused for the seller's balance, or not at all (20000). */
  const refundBehaviour = { balanceShort: false, down: false };
  const refundedOf = (t: Trade) => [...t.refunds.values()].reduce((sum, f) => sum + f, 0);

  /** A refund as Alipay makes it: one per out_request_no, never more than remains. */
  function makeRefund(t: Trade, outRequestNo: string, amount: number): Record<string, unknown> {
    if (t.status !== 'TRADE_SUCCESS') return { code: '40004', msg: 'Business Failed', sub_code: 'ACQ.TRADE_STATUS_ERROR', sub_msg: '交易状态不合法' };
    const earlier = t.refunds.get(outRequestNo);
    if (earlier !== undefined) {
      if (earlier !== amount) return { code: '40004', msg: 'Business Failed', sub_code: 'ACQ.REFUND_AMT_NOT_EQUAL_TOTAL', sub_msg: '退款金额与原请求不一致' };
      return { code: '10000', msg: 'Success', trade_no: t.trade_no, out_trade_no: t.out_trade_no, fund_change: 'N', refund_fee: yuan(refundedOf(t)) };
    }
    if (amount <= 0 || amount > fen(t.total_amount) - refundedOf(t))
      return { code: '40004', msg: 'Business Failed', sub_code: 'ACQ.REFUND_AMT_RESTRICTION', sub_msg: '退款金额超限' };
    t.refunds.set(outRequestNo, amount);
    return { code: '10000', msg: 'Success', trade_no: t.trade_no, out_trade_no: t.out_trade_no, fund_change: 'Y', refund_fee: yuan(refundedOf(t)) };
  }

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const params = Object.fromEntries(new URLSearchParams(await req.text()));
      const method = params.method ?? '';
      const valid = params.app_id === appId && createVerify('RSA-SHA256').update(signingString(params, ['sign'])).verify(app.publicKey, params.sign ?? '', 'base64');
      if (!valid) return answer(method, { code: '40002', msg: 'Invalid Arguments', sub_code: 'isv.invalid-signature', sub_msg: '验签出错' });
      const biz = JSON.parse(params.biz_content ?? '{}');
      const trade = trades.get(biz.out_trade_no);
      switch (method) {
        case 'alipay.trade.precreate':
          trades.set(biz.out_trade_no, { out_trade_no: biz.out_trade_no, total_amount: biz.total_amount, status: 'CREATED', refunds: new Map() });
          return answer(method, { code: '10000', msg: 'Success', out_trade_no: biz.out_trade_no, qr_code: `https://qr.alipay.com/bax0${randomBytes(6).toString('hex')}` });
        case 'alipay.trade.query':
          // Alipay knows a precreated trade only once the buyer has scanned it.
          if (!trade || trade.status === 'CREATED') return answer(method, notExist);
          return answer(method, { code: '10000', msg: 'Success', out_trade_no: trade.out_trade_no, trade_no: trade.trade_no ?? '', trade_status: trade.status, total_amount: trade.total_amount });
        case 'alipay.trade.close':
          if (!trade || trade.status === 'CREATED') return answer(method, notExist);
          if (trade.status === 'TRADE_SUCCESS') return answer(method, { code: '40004', msg: 'Business Failed', sub_code: 'ACQ.TRADE_STATUS_ERROR' });
          trade.status = 'TRADE_CLOSED';
          return answer(method, { code: '10000', msg: 'Success', out_trade_no: trade.out_trade_no });
        case 'alipay.trade.refund':
          if (refundBehaviour.down) return answer(method, { code: '20000', msg: 'Service Currently Unavailable', sub_code: 'isp.unknow-error' });
          if (!trade || trade.status === 'CREATED') return answer(method, notExist);
          if (refundBehaviour.balanceShort) return answer(method, { code: '40004', msg: 'Business Failed', sub_code: 'ACQ.SELLER_BALANCE_NOT_ENOUGH', sub_msg: '卖家余额不足' });
          return answer(method, makeRefund(trade, biz.out_request_no ?? biz.out_trade_no, fen(biz.refund_amount)));
        case 'alipay.trade.fastpay.refund.query': {
          const refunded = trade?.refunds.get(biz.out_request_no);
          // An unknown refund is a success with no refund fields.
          if (!trade || refunded === undefined) return answer(method, { code: '10000', msg: 'Success' });
          return answer(method, {
            code: '10000',
            msg: 'Success',
            trade_no: trade.trade_no,
            out_trade_no: trade.out_trade_no,
            out_request_no: biz.out_request_no,
            total_amount: trade.total_amount,
            refund_amount: yuan(refunded),
            refund_status: 'REFUND_SUCCESS',
          });
        }
        default:
          return answer(method, { code: '40004', msg: 'Business Failed', sub_code: 'isv.invalid-method' });
      }
    },
  });

  /** The asynchronous notification Alipay POSTs (form-encoded, RSA2 over the sorted parameters). */
  function notification(t: Trade, refund?: { outBizNo: string }) {
    const refunded = refundedOf(t);
    const params: Record<string, string> = {
      ...(refund
        ? { out_biz_no: refund.outBizNo, refund_fee: yuan(refunded), gmt_refund: '2026-11-22 11:00:00.000' }
        : {}),
      notify_time: '2026-11-22 10:00:00',
      notify_type: 'trade_status_sync',
      notify_id: randomBytes(8).toString('hex'),
      app_id: appId,
      charset: 'utf-8',
      version: '1.0',
      sign_type: 'RSA2',
      trade_no: t.trade_no!,
      out_trade_no: t.out_trade_no,
      trade_status: refunded > 0 && refunded === fen(t.total_amount) ? 'TRADE_CLOSED' : t.status,
      total_amount: t.total_amount,
      receipt_amount: t.total_amount,
      subject: '钱包充值 top-up',
      gmt_payment: '2026-11-22 10:00:00',
    };
    params.sign = sign(signingString(params, ['sign', 'sign_type']));
    return { body: new URLSearchParams(params).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' } };
  }

  return {
    url: `http://127.0.0.1:${server.port}/gateway.do`,
    trades,
    refundBehaviour,
    env: { ALIPAY_APP_ID: appId, ALIPAY_PRIVATE_KEY: app.privateKey, ALIPAY_PUBLIC_KEY: alipay.publicKey, ALIPAY_GATEWAY_URL: `http://127.0.0.1:${server.port}/gateway.do` },
    /** The buyer scans: Alipay now knows the trade, waiting for payment. */
    scan(paymentId: string) {
      trades.get(paymentId)!.status = 'WAIT_BUYER_PAY';
    },
    pay(paymentId: string, totalAmount?: string) {
      const t = trades.get(paymentId)!;
      Object.assign(t, { status: 'TRADE_SUCCESS', trade_no: `2026112222001${randomBytes(6).toString('hex')}` });
      if (totalAmount !== undefined) t.total_amount = totalAmount;
      return notification(t);
    },
    /** A refund made at the merchant console; answers its out_request_no. */
    refundAtConsole(paymentId: string, amountFen: number) {
      const outRequestNo = `HZ${randomBytes(8).toString('hex')}`;
      if (makeRefund(trades.get(paymentId)!, outRequestNo, amountFen).code !== '10000') throw new Error('the fake refused the console refund');
      return outRequestNo;
    },
    /** The trade's notification after the refund `outBizNo`, as it now is (refund_fee: every refund so far). */
    refundNotification: (paymentId: string, outBizNo: string) => notification(trades.get(paymentId)!, { outBizNo }),
    stop: () => server.stop(true),
  };
}

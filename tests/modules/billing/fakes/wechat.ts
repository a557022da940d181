/**
 * A local WeChat Pay API v3 (Native payments and domestic refunds): checks our
 * WECHATPAY2-SHA256-RSA2048 request signatures with the merchant public key, and signs
 * notifications as WeChat Pay does: SHA256-RSA over "timestamp\nnonce\nbody\n" with the platform
 * key, resource encrypted with AES-256-GCM. A refund is made once per out_refund_no.
 */
import { createCipheriv, createSign, createVerify, randomBytes } from 'node:crypto';
import { rsaKeyPair } from './keys';

interface Order {
  out_trade_no: string;
  total: number;
  currency: string;
  trade_state: 'NOTPAY' | 'SUCCESS' | 'CLOSED' | 'PAYERROR';
  transaction_id?: string;
  notify_url: string;
}

export interface FakeWechatRefund {
  out_refund_no: string;
  refund_id: string;
  out_trade_no: string;
  transaction_id: string;
  refund: number;
  total: number;
  status: 'SUCCESS' | 'PROCESSING' | 'CLOSED' | 'ABNORMAL';
  reason?: string;
  notify_url?: string;
}

export function startFakeWechat() {
  const merchant = rsaKeyPair();
  const platform = rsaKeyPair();
  const apiV3Key = randomBytes(16).toString('hex'); // 32 ASCII bytes
  const mchId = '1900000109';
  const orders = new Map<string, Order>();
  /** Order queries received, by out_trade_no. */
  const queries = new Map<string, number>();
  const refunds = new Map<string, FakeWechatRefund>();
  /** How the next refunds are answered: their status, NOT_ENOUGH (merchant balance short), or no answer (500). */
  const refundBehaviour = { status: 'SUCCESS' as FakeWechatRefund['status'], notEnough: false, down: false };
  const refundedOf = (o: Order) => [...refunds.values()].filter((r) => r.out_trade_no === o.out_trade_no && r.status !== 'CLOSED').reduce((sum, r) => sum + r.refund, 0);
  const refundAnswer = (r: FakeWechatRefund) => ({
    refund_id: r.refund_id,
    out_refund_no: r.out_refund_no,
    transaction_id: r.transaction_id,
    out_trade_no: r.out_trade_no,
    channel: 'ORIGINAL',
    user_received_account: '支付用户零钱',
    create_time: new Date().toISOString(),
    status: r.status,
    amount: { total: r.total, refund: r.refund, payer_total: r.total, payer_refund: r.refund, currency: 'CNY' },
  });

  /** A refund as WeChat Pay makes it (refusing more than remains); answers it or WeChat Pay's error. */
  function makeRefund(o: Order, outRefundNo: string, refund: number, total: number, extra: Partial<FakeWechatRefund> = {}): FakeWechatRefund | Response {
    if (o.trade_state !== 'SUCCESS') return fail(400, 'INVALID_REQUEST');
    if (total !== o.total || refund <= 0) return fail(400, 'PARAM_ERROR');
    if (refund > o.total - refundedOf(o)) return fail(400, 'INVALID_REQUEST');
    const r: FakeWechatRefund = {
      out_refund_no: outRefundNo,
      refund_id: `50300${randomBytes(10).toString('hex')}`,
      out_trade_no: o.out_trade_no,
      transaction_id: o.transaction_id!,
      refund,
      total,
      status: refundBehaviour.status,
      ...extra,
    };
    refunds.set(outRefundNo, r);
    return r;
  }
  const fail = (status: number, code: string) => Response.json({ code, message: code }, { status });

  function signatureValid(req: Request, path: string, body: string): boolean {
    const m = /^WECHATPAY2-SHA256-RSA2048 (.*)$/.exec(req.headers.get('authorization') ?? '');
    if (!m) return false;
    const f = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (f.mchid !== mchId) return false;
    const message = `${req.method}\n${path}\n${f.timestamp}\n${f.nonce_str}\n${body}\n`;
    return createVerify('RSA-SHA256').update(message).verify(merchant.publicKey, f.signature ?? '', 'base64');
  }

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const body = req.method === 'GET' ? '' : await req.text();
      if (!signatureValid(req, url.pathname + url.search, body)) return fail(401, 'SIGN_ERROR');
      if (req.method === 'POST' && url.pathname === '/v3/pay/transactions/native') {
        const o = JSON.parse(body);
        if (o.mchid !== mchId || !o.appid || !o.notify_url || !o.amount?.total) return fail(400, 'PARAM_ERROR');
        orders.set(o.out_trade_no, { out_trade_no: o.out_trade_no, total: o.amount.total, currency: o.amount.currency ?? 'CNY', trade_state: 'NOTPAY', notify_url: o.notify_url });
        return Response.json({ code_url: `weixin://wxpay/bizpayurl?pr=${randomBytes(6).toString('hex')}` });
      }
      if (req.method === 'POST' && url.pathname === '/v3/refund/domestic/refunds') {
        if (refundBehaviour.down) return fail(500, 'SYSTEM_ERROR');
        if (refundBehaviour.notEnough) return fail(403, 'NOT_ENOUGH');
        const r = JSON.parse(body);
        const existing = refunds.get(r.out_refund_no);
        if (existing) return Response.json(refundAnswer(existing)); // one out_refund_no is one refund
        const o = orders.get(r.out_trade_no);
        if (!o) return fail(404, 'RESOURCE_NOT_EXISTS');
        const made = makeRefund(o, r.out_refund_no, r.amount?.refund, r.amount?.total, { reason: r.reason, notify_url: r.notify_url });
        return made instanceof Response ? made : Response.json(refundAnswer(made));
      }
      const rq = /^\/v3\/refund\/domestic\/refunds\/([^/]+)$/.exec(url.pathname);
      if (req.method === 'GET' && rq) {
        const r = refunds.get(decodeURIComponent(rq[1]!));
        return r ? Response.json(refundAnswer(r)) : fail(404, 'RESOURCE_NOT_EXISTS');
      }
      const m = /^\/v3\/pay\/transactions\/out-trade-no\/([^/]+)(\/close)?$/.exec(url.pathname);
      const order = m ? orders.get(decodeURIComponent(m[1]!)) : undefined;
      if (!order) return fail(404, 'ORDER_NOT_EXIST');
      if (req.method === 'GET' && !m![2]) {
        queries.set(order.out_trade_no, (queries.get(order.out_trade_no) ?? 0) + 1);
        return Response.json(transaction(order));
      }
      if (req.method === 'POST' && m![2]) {
        if (order.trade_state === 'SUCCESS') return fail(400, 'ORDERPAID');
        order.trade_state = 'CLOSED';
        return new Response(null, { status: 204 });
      }
      return fail(404, 'NOT_FOUND');
    },
  });

  const transaction = (o: Order) => ({
    mchid: mchId,
    out_trade_no: o.out_trade_no,
    transaction_id: o.transaction_id,
    trade_type: 'NATIVE',
    // A paid order with a refund is REFUND (转入退款) from then on.
    trade_state: o.trade_state === 'SUCCESS' && refundedOf(o) > 0 ? 'REFUND' : o.trade_state,
    amount: { total: o.total, payer_total: o.total, currency: o.currency, payer_currency: o.currency },
  });

  /** The notification WeChat Pay POSTs for an order, signed and encrypted as WeChat Pay does. */
  const notification = (o: Order) => signed('TRANSACTION.SUCCESS', '支付成功', 'transaction', transaction(o));

  /** A refund's notification: REFUND.SUCCESS, REFUND.CLOSED or REFUND.ABNORMAL, by its status. */
  const refundNotification = (r: FakeWechatRefund) =>
    signed(`REFUND.${r.status}`, '退款状态变更', 'refund', {
      mchid: mchId,
      out_trade_no: r.out_trade_no,
      transaction_id: r.transaction_id,
      out_refund_no: r.out_refund_no,
      refund_id: r.refund_id,
      refund_status: r.status,
      success_time: new Date().toISOString(),
      user_received_account: '支付用户零钱',
      amount: { total: r.total, refund: r.refund, payer_total: r.total, payer_refund: r.refund },
    });

  function signed(eventType: string, summary: string, originalType: string, resource: object) {
    const nonce = randomBytes(6).toString('hex'); // 12 bytes, as WeChat Pay uses
    const cipher = createCipheriv('aes-256-gcm', Buffer.from(apiV3Key), Buffer.from(nonce));
    cipher.setAAD(Buffer.from(originalType));
    const ct = Buffer.concat([cipher.update(JSON.stringify(resource), 'utf8'), cipher.final(), cipher.getAuthTag()]);
    const body = JSON.stringify({
      id: randomBytes(8).toString('hex'),
      create_time: new Date().toISOString(),
      resource_type: 'encrypt-resource',
      event_type: eventType,
      summary,
      resource: { original_type: originalType, algorithm: 'AEAD_AES_256_GCM', ciphertext: ct.toString('base64'), associated_data: originalType, nonce },
    });
    const timestamp = Math.floor(Date.now() / 1000).toString();
    const headerNonce = randomBytes(16).toString('hex');
    const signature = createSign('RSA-SHA256').update(`${timestamp}\n${headerNonce}\n${body}\n`).sign(platform.privateKey, 'base64');
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'wechatpay-timestamp': timestamp,
        'wechatpay-nonce': headerNonce,
        'wechatpay-signature': signature,
        'wechatpay-serial': 'PLATFORM_SERIAL_1',
      },
    };
  }

  return {
    url: `http://127.0.0.1:${server.port}`,
    orders,
    queries,
    refunds,
    refundBehaviour,
    env: {
      WECHAT_APP_ID: 'wxd678efh567hg6787',
      WECHAT_MCH_ID: mchId,
      WECHAT_MCH_SERIAL_NO: '5157F09EFDC096DE15EBE81A47057A7232F1B8E1',
      WECHAT_MCH_PRIVATE_KEY: merchant.privateKey,
      WECHAT_API_V3_KEY: apiV3Key,
      WECHAT_PLATFORM_PUBLIC_KEY: platform.publicKey,
      WECHAT_API_URL: `http://127.0.0.1:${server.port}`,
    },
    /** The payer scans and pays: the order succeeds; returns its signed notification. */
    pay(paymentId: string, total?: number) {
      const o = orders.get(paymentId)!;
      Object.assign(o, { trade_state: 'SUCCESS', transaction_id: `4200000${randomBytes(8).toString('hex')}` });
      if (total !== undefined) o.total = total;
      return notification(o);
    },
    /** The payer's bank refuses the payment: the order is PAYERROR; returns its signed notification. */
    payError(paymentId: string) {
      const o = orders.get(paymentId)!;
      o.trade_state = 'PAYERROR';
      return notification(o);
    },
    /** A refund made at the merchant platform (its own out_refund_no); answers it. */
    refundAtMerchantPlatform(paymentId: string, refund: number) {
      const o = orders.get(paymentId)!;
      const made = makeRefund(o, `MP${randomBytes(8).toString('hex')}`, refund, o.total, { status: 'SUCCESS' });
      if (made instanceof Response) throw new Error('the fake refused the merchant platform refund');
      return made;
    },
    /** The refund's notification as it now is. */
    refundNotification,
    /** A refund's state changes at WeChat Pay (PROCESSING → SUCCESS or CLOSED); answers its notification. */
    settleRefund(outRefundNo: string, status: FakeWechatRefund['status']) {
      const r = refunds.get(outRefundNo)!;
      r.status = status;
      return refundNotification(r);
    },
    stop: () => server.stop(true),
  };
}

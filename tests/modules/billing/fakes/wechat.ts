/**
 * A local WeChat Pay API v3 (Native): checks our WECHATPAY2-SHA256-RSA2048 request signatures with
 * the merchant public key, and signs notifications as WeChat Pay does: SHA256-RSA over
 * "timestamp\nnonce\nbody\n" with the platform key, resource encrypted with AES-256-GCM.
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

export function startFakeWechat() {
  const merchant = rsaKeyPair();
  const platform = rsaKeyPair();
  const apiV3Key = randomBytes(16).toString('hex'); // 32 ASCII bytes
  const mchId = '1900000109';
  const orders = new Map<string, Order>();
  /** Order queries received, by out_trade_no. */
  const queries = new Map<string, number>();
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
    trade_state: o.trade_state,
    amount: { total: o.total, payer_total: o.total, currency: o.currency, payer_currency: o.currency },
  });

  /** The notification WeChat Pay POSTs for an order, signed and encrypted as WeChat Pay does. */
  function notification(o: Order) {
    const nonce = randomBytes(6).toString('hex'); // 12 bytes, as WeChat Pay uses
    const cipher = createCipheriv('aes-256-gcm', Buffer.from(apiV3Key), Buffer.from(nonce));
    cipher.setAAD(Buffer.from('transaction'));
    const ct = Buffer.concat([cipher.update(JSON.stringify(transaction(o)), 'utf8'), cipher.final(), cipher.getAuthTag()]);
    const body = JSON.stringify({
      id: randomBytes(8).toString('hex'),
      create_time: new Date().toISOString(),
      resource_type: 'encrypt-resource',
      event_type: 'TRANSACTION.SUCCESS',
      summary: '支付成功',
      resource: { original_type: 'transaction', algorithm: 'AEAD_AES_256_GCM', ciphertext: ct.toString('base64'), associated_data: 'transaction', nonce },
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
    stop: () => server.stop(true),
  };
}

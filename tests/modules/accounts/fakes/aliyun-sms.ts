/**
 * A local Aliyun Dysmsapi endpoint (SendSms, RPC style). It checks each request's signature the way
 * Alibaba Cloud documents it, computed here on its own from the raw request (a byte-wise percent
 * encoder, node:crypto's HMAC-SHA1 under AccessKeySecret + "&"), and answers in Dysmsapi's shapes:
 * 200 {Code: "OK", BizId…} when sent, 400/404 {Code, Message, RequestId, HostId, Recommend} for a
 * bad signature, an unknown key, a stale timestamp or a reused nonce, 200 with an isv.* Code when
 * the message is refused.
 */
import { createHmac, randomUUID } from 'node:crypto';

export interface AliyunMessage {
  phoneNumbers: string;
  signName: string;
  templateCode: string;
  templateParam: Record<string, string>;
}

/** The documented encoding, byte by byte: only A-Z a-z 0-9 - _ . ~ stay literal; everything else is %XY of its UTF-8 bytes. */
export function documentedPercentEncode(text: string): string {
  let out = '';
  for (const byte of new TextEncoder().encode(text)) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Signature = Base64(HMAC-SHA1(secret + "&", METHOD&%2F&encode(sorted encoded k=v joined by &))). */
export function documentedSignature(method: string, params: Record<string, string>, secret: string): string {
  const canonical = Object.keys(params)
    .filter((k) => k !== 'Signature')
    .sort()
    .map((k) => `${documentedPercentEncode(k)}=${documentedPercentEncode(params[k]!)}`)
    .join('&');
  const stringToSign = `${method}&${documentedPercentEncode('/')}&${documentedPercentEncode(canonical)}`;
  return createHmac('sha1', `${secret}&`).update(stringToSign, 'utf8').digest('base64');
}

export function startFakeAliyunSms(
  opts: { accessKeyId?: string; accessKeySecret?: string; signName?: string; templateCode?: string } = {},
) {
  const account = {
    accessKeyId: opts.accessKeyId ?? 'LTAI5tFakeAccessKeyId',
    accessKeySecret: opts.accessKeySecret ?? 'fake-aliyun-access-key-secret',
    signName: opts.signName ?? '阿里云短信测试',
    templateCode: opts.templateCode ?? 'SMS_154950909',
  };
  const messages: AliyunMessage[] = [];
  const rejected: string[] = [];
  const nonces = new Set<string>();
  /** The next SendSms is refused with this isv.* Code (Aliyun's own flow control, say). */
  const behaviour: { refuseNext: string | null } = { refuseNext: null };

  const error = (status: number, code: string, message: string) => {
    rejected.push(code);
    return Response.json(
      {
        RequestId: randomUUID(),
        HostId: 'dysmsapi.aliyuncs.com',
        Code: code,
        Message: message,
        Recommend: `https://api.aliyun.com/troubleshoot?q=${code}`,
      },
      { status },
    );
  };

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const params: Record<string, string> = Object.fromEntries(url.searchParams);
      if (req.method === 'POST') Object.assign(params, Object.fromEntries(new URLSearchParams(await req.text())));
      if (params.SignatureMethod !== 'HMAC-SHA1' || params.SignatureVersion !== '1.0')
        return error(400, 'InvalidSignatureMethod', 'Specified signature method is not supported.');
      if (params.AccessKeyId !== account.accessKeyId)
        return error(404, 'InvalidAccessKeyId.NotFound', 'Specified access key is not found.');
      if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(params.Timestamp ?? ''))
        return error(400, 'InvalidTimeStamp.Format', 'Specified time stamp or date value is not well formatted.');
      if (Math.abs(Date.parse(params.Timestamp!) - Date.now()) > 15 * 60_000)
        return error(400, 'InvalidTimeStamp.Expired', 'Specified time stamp or date value is expired.');
      if (params.Signature !== documentedSignature(req.method, params, account.accessKeySecret))
        return error(400, 'SignatureDoesNotMatch', 'Specified signature is not matched with our calculation.');
      if (!params.SignatureNonce || nonces.has(params.SignatureNonce))
        return error(400, 'SignatureNonceUsed', 'Specified signature nonce was used already.');
      nonces.add(params.SignatureNonce);
      if (params.Action !== 'SendSms' || params.Version !== '2017-05-25')
        return error(404, 'InvalidAction.NotFound', 'Specified api is not found, please check your url and method.');

      const ok = (body: Record<string, unknown>) => Response.json({ RequestId: randomUUID(), ...body });
      if (params.SignName !== account.signName) return ok({ Code: 'isv.SMS_SIGNATURE_ILLEGAL', Message: '该账号下找不到对应签名' });
      if (params.TemplateCode !== account.templateCode) return ok({ Code: 'isv.SMS_TEMPLATE_ILLEGAL', Message: '该账号下找不到对应模板' });
      if (!/^\d{5,20}$/.test(params.PhoneNumbers ?? '')) return ok({ Code: 'isv.MOBILE_NUMBER_ILLEGAL', Message: '手机号码格式错误' });
      if (behaviour.refuseNext) {
        const code = behaviour.refuseNext;
        behaviour.refuseNext = null;
        return ok({ Code: code, Message: '触发号码天级流控Permits:10' });
      }
      messages.push({
        phoneNumbers: params.PhoneNumbers!,
        signName: params.SignName!,
        templateCode: params.TemplateCode!,
        templateParam: JSON.parse(params.TemplateParam ?? '{}'),
      });
      return ok({ Code: 'OK', Message: 'OK', BizId: `${Date.now()}^0` });
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    account,
    messages,
    /** Error Codes of the requests refused before any message (bad signature, unknown key…). */
    rejected,
    behaviour,
    /** The environment that points cpd at this fake. */
    env: (overrides: Record<string, string> = {}) => ({
      SMS_PROVIDER: 'aliyun',
      ALIYUN_SMS_URL: `http://127.0.0.1:${server.port}`,
      ALIYUN_ACCESS_KEY_ID: account.accessKeyId,
      ALIYUN_ACCESS_KEY_SECRET: account.accessKeySecret,
      ALIYUN_SMS_SIGN_NAME: account.signName,
      ALIYUN_SMS_TEMPLATE_CODE: account.templateCode,
      ...overrides,
    }),
    stop: () => server.stop(true),
  };
}

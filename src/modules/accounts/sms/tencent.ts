/**
 * Tencent Cloud SMS SendSms (API 3.0, version 2021-01-11), signed with TC3-HMAC-SHA256 as Tencent
 * Cloud documents it (API 3.0 "Signature v3" / 签名方法 v3):
 * CanonicalRequest = POST\n/\n\ncontent-type:…\nhost:…\n\ncontent-type;host\nhex(sha256(body));
 * StringToSign = TC3-HMAC-SHA256\nTimestamp\nDate/sms/tc3_request\nhex(sha256(CanonicalRequest));
 * the key is derived HMAC-SHA256("TC3" + SecretKey, Date) → service → "tc3_request".
 * Written against the HTTP API: the official tencentcloud-sdk-nodejs carries every product's
 * client for this one signed POST.
 */
import type { SmsSettings } from '../../../config-accounts';
import { nodeCrypto, sha256Hex } from '../../../platform/crypto';
import { SmsError, type SmsSender } from './sms-sender';

type TencentSettings = Extract<SmsSettings, { provider: 'tencent' }>;

const ALGORITHM = 'TC3-HMAC-SHA256';
export const TENCENT_CONTENT_TYPE = 'application/json; charset=utf-8';

const hmac = (key: string | Buffer, message: string) => nodeCrypto().createHmac('sha256', key).update(message, 'utf8').digest();

export interface Tc3Request {
  secretId: string;
  secretKey: string;
  service: string;
  /** The Host header as sent (host[:port]). */
  host: string;
  contentType: string;
  body: string;
  /** Unix seconds; its UTC date is the credential's date. */
  timestamp: number;
}

/** The Authorization header of a POST to API 3.0, and the pieces it is made of (the tests hold them to Tencent's example). */
export function tc3Sign(r: Tc3Request) {
  const date = new Date(r.timestamp * 1000).toISOString().slice(0, 10);
  const signedHeaders = 'content-type;host';
  const canonicalRequest = `POST\n/\n\ncontent-type:${r.contentType.toLowerCase()}\nhost:${r.host.toLowerCase()}\n\n${signedHeaders}\n${sha256Hex(r.body)}`;
  const scope = `${date}/${r.service}/tc3_request`;
  const stringToSign = `${ALGORITHM}\n${r.timestamp}\n${scope}\n${sha256Hex(canonicalRequest)}`;
  const signing = hmac(hmac(hmac(`TC3${r.secretKey}`, date), r.service), 'tc3_request');
  const signature = nodeCrypto().createHmac('sha256', signing).update(stringToSign, 'utf8').digest('hex');
  return {
    canonicalRequest,
    stringToSign,
    signature,
    authorization: `${ALGORITHM} Credential=${r.secretId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`,
  };
}

export function tencentSender(settings: TencentSettings): SmsSender {
  const url = new URL(settings.url);
  return {
    async send(phone, code) {
      const body = JSON.stringify({
        PhoneNumberSet: [phone],
        SmsSdkAppId: settings.sdkAppId,
        SignName: settings.signName,
        TemplateId: settings.templateId,
        TemplateParamSet: [code],
      });
      const timestamp = Math.floor(Date.now() / 1000);
      const { authorization } = tc3Sign({
        secretId: settings.secretId,
        secretKey: settings.secretKey,
        service: 'sms',
        host: url.host,
        contentType: TENCENT_CONTENT_TYPE,
        body,
        timestamp,
      });
      let res: Response;
      try {
        res = await fetch(url, {
          method: 'POST',
          headers: {
            authorization,
            'content-type': TENCENT_CONTENT_TYPE,
            'x-tc-action': 'SendSms',
            'x-tc-version': '2021-01-11',
            'x-tc-region': settings.region,
            'x-tc-timestamp': String(timestamp),
          },
          body,
          signal: AbortSignal.timeout(10_000),
        });
      } catch (err) {
        throw new SmsError('unreachable', `Tencent Cloud SMS could not be reached: ${(err as Error).name}`);
      }
      let answer: any;
      try {
        answer = JSON.parse(await res.text());
      } catch {
        throw new SmsError('refused', `Tencent Cloud SMS answered HTTP ${res.status} without JSON`);
      }
      const error = answer?.Response?.Error;
      if (error)
        throw new SmsError('refused', `Tencent Cloud SMS refused the request: ${String(error.Code)} ${String(error.Message ?? '')}`.trim());
      const status = answer?.Response?.SendStatusSet?.[0];
      if (status?.Code !== 'Ok')
        throw new SmsError(
          'refused',
          `Tencent Cloud SMS did not send the message: ${String(status?.Code ?? 'no SendStatusSet')} ${String(status?.Message ?? '')}`.trim(),
        );
    },
  };
}

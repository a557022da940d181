/**
 * Aliyun SMS (Dysmsapi) SendSms, RPC style, signed as Alibaba Cloud documents its RPC signature
 * ("Signature mechanism" / 签名机制 of RPC APIs, help.aliyun.com): the parameters sorted by name,
 * each name and value percent-encoded (only A-Z a-z 0-9 - _ . ~ stay literal), joined with & and =;
 * StringToSign = METHOD & percentEncode("/") & percentEncode(that query); Signature =
 * Base64(HMAC-SHA1(AccessKeySecret + "&", StringToSign)). Written against the HTTP API: the official
 * SDK (@alicloud/dysmsapi20170525 and its tea runtime) is a tree of packages for one signed POST.
 */
import type { SmsSettings } from '../../../config-accounts';
import { nodeCrypto } from '../../../platform/crypto';
import { SmsError, type SmsSender } from './sms-sender';

type AliyunSettings = Extract<SmsSettings, { provider: 'aliyun' }>;

/** RFC 3986 encoding as Alibaba Cloud wants it: encodeURIComponent also leaves ! ' ( ) * literal. */
export const aliyunPercentEncode = (value: string) =>
  encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export function aliyunStringToSign(method: string, params: Record<string, string>): string {
  const canonical = Object.keys(params)
    .sort()
    .map((k) => `${aliyunPercentEncode(k)}=${aliyunPercentEncode(params[k]!)}`)
    .join('&');
  return `${method}&${aliyunPercentEncode('/')}&${aliyunPercentEncode(canonical)}`;
}

export function aliyunSignature(method: string, params: Record<string, string>, accessKeySecret: string): string {
  return nodeCrypto().createHmac('sha1', `${accessKeySecret}&`).update(aliyunStringToSign(method, params), 'utf8').digest('base64');
}

/** Dysmsapi takes a mainland number without +86, and any other as country code + number without the +. */
export const aliyunPhoneNumber = (e164: string) => (e164.startsWith('+86') ? e164.slice(3) : e164.replace(/^\+/, ''));

export function aliyunSender(settings: AliyunSettings): SmsSender {
  return {
    async send(phone, code) {
      const params: Record<string, string> = {
        AccessKeyId: settings.accessKeyId,
        Action: 'SendSms',
        Format: 'JSON',
        PhoneNumbers: aliyunPhoneNumber(phone),
        RegionId: 'cn-hangzhou',
        SignName: settings.signName,
        SignatureMethod: 'HMAC-SHA1',
        SignatureNonce: crypto.randomUUID(),
        SignatureVersion: '1.0',
        TemplateCode: settings.templateCode,
        TemplateParam: JSON.stringify({ code }),
        // ISO 8601 in UTC without milliseconds, as the documentation spells it.
        Timestamp: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
        Version: '2017-05-25',
      };
      params.Signature = aliyunSignature('POST', params, settings.accessKeySecret);
      // POST with a form body: the phone number stays out of any proxy's URL logs.
      const body = Object.entries(params)
        .map(([k, v]) => `${aliyunPercentEncode(k)}=${aliyunPercentEncode(v)}`)
        .join('&');
      const answer = await postForJson(`${settings.url.replace(/\/$/, '')}/`, body);
      if (answer?.Code !== 'OK')
        throw new SmsError(
          'refused',
          `Aliyun SMS refused the message: ${String(answer?.Code ?? 'no Code')} ${String(answer?.Message ?? '')}`.trim(),
        );
    },
  };

  async function postForJson(url: string, body: string): Promise<Record<string, unknown> | null> {
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body,
        signal: AbortSignal.timeout(10_000),
      });
    } catch (err) {
      throw new SmsError('unreachable', `Aliyun SMS could not be reached: ${(err as Error).name}`);
    }
    const text = await res.text();
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new SmsError('refused', `Aliyun SMS answered HTTP ${res.status} without JSON`);
    }
  }
}

import { nodeCrypto } from '../../../platform/crypto';

/** SHA256withRSA (WeChat Pay v3 "WECHATPAY2-SHA256-RSA2048", Alipay "RSA2"), base64 signatures. */
export const rsaSign = (message: string, privateKeyPem: string) => nodeCrypto().createSign('RSA-SHA256').update(message, 'utf8').sign(privateKeyPem, 'base64');

export function rsaVerify(message: string, signatureBase64: string, publicKeyPem: string): boolean {
  try {
    return nodeCrypto().createVerify('RSA-SHA256').update(message, 'utf8').verify(publicKeyPem, signatureBase64, 'base64');
  } catch {
    return false;
  }
}

/** "2026-11-22 10:30:00" / "2026-11-22T10:30:00+08:00" in China Standard Time (both providers' clocks). */
export function chinaTime(at: Date): { date: string; time: string } {
  const local = new Date(at.getTime() + 8 * 3_600_000).toISOString();
  return { date: local.slice(0, 10), time: local.slice(11, 19) };
}

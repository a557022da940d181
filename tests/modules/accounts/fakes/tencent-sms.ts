/**
 * A local Tencent Cloud SMS endpoint (API 3.0 SendSms, 2021-01-11). It checks each request's
 * TC3-HMAC-SHA256 signature as Tencent Cloud documents it, computed here on its own from the raw
 * request: the SignedHeaders the Authorization names, their values as received, the body's
 * SHA-256, the key derived from "TC3" + SecretKey through date, service and "tc3_request". It
 * answers in API 3.0's shapes: {Response: {Error: {Code, Message}, RequestId}} for a refused
 * request (HTTP 200, as Tencent does), {Response: {SendStatusSet: […], RequestId}} otherwise.
 */
import { createHash, createHmac, randomUUID } from 'node:crypto';

export interface TencentMessage {
  phoneNumberSet: string[];
  signName: string;
  templateId: string;
  templateParamSet: string[];
  region: string;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const hmac = (key: string | Buffer, s: string) => createHmac('sha256', key).update(s, 'utf8').digest();

/** Signature of a POST to API 3.0 from the pieces a server sees: the headers it got, the body, the credential's date and service. */
export function documentedTc3Signature(input: {
  secretKey: string;
  headers: Record<string, string>;
  signedHeaders: string[];
  body: string;
  timestamp: string;
  date: string;
  service: string;
}): string {
  const canonicalHeaders = input.signedHeaders.map((h) => `${h}:${(input.headers[h] ?? '').trim().toLowerCase()}\n`).join('');
  const canonicalRequest = ['POST', '/', '', canonicalHeaders, input.signedHeaders.join(';'), sha256(input.body)].join('\n');
  const stringToSign = ['TC3-HMAC-SHA256', input.timestamp, `${input.date}/${input.service}/tc3_request`, sha256(canonicalRequest)].join(
    '\n',
  );
  const key = hmac(hmac(hmac(`TC3${input.secretKey}`, input.date), input.service), 'tc3_request');
  return createHmac('sha256', key).update(stringToSign, 'utf8').digest('hex');
}

export function startFakeTencentSms(opts: { secretId?: string; secretKey?: string } = {}) {
  const account = {
    secretId: opts.secretId ?? 'AKIDFakeTencentSecretId0123456789',
    secretKey: opts.secretKey ?? 'fake-tencent-secret-key',
    sdkAppId: '1400787878',
    signName: '腾讯云短信测试',
    templateId: '449739',
  };
  const messages: TencentMessage[] = [];
  const rejected: string[] = [];
  /** The next SendSms is answered with this SendStatusSet Code (a per-number limit, say). */
  const behaviour: { refuseNext: string | null } = { refuseNext: null };

  const error = (code: string, message: string) => {
    rejected.push(code);
    return Response.json({ Response: { Error: { Code: code, Message: message }, RequestId: randomUUID() } });
  };

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const body = await req.text();
      const headers: Record<string, string> = {};
      req.headers.forEach((value, name) => {
        headers[name.toLowerCase()] = value;
      });
      const auth =
        /^TC3-HMAC-SHA256 Credential=([^/]+)\/(\d{4}-\d\d-\d\d)\/([a-z]+)\/tc3_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/.exec(
          headers.authorization ?? '',
        );
      if (!auth) return error('AuthFailure.InvalidAuthorization', 'Credential should contain SecretId, Date, Service and tc3_request.');
      const [, secretId, date, service, signedHeaderList, signature] = auth;
      if (secretId !== account.secretId)
        return error('AuthFailure.SecretIdNotFound', 'The SecretId is not found, please ensure that your SecretId is correct.');
      const timestamp = headers['x-tc-timestamp'] ?? '';
      if (!/^\d+$/.test(timestamp) || Math.abs(Number(timestamp) * 1000 - Date.now()) > 5 * 60_000)
        return error('AuthFailure.SignatureExpire', 'Signature expired. Timestamp and server time cannot differ by more than 5 minutes.');
      const signedHeaders = signedHeaderList!.split(';');
      if (
        !signedHeaders.includes('content-type') ||
        !signedHeaders.includes('host') ||
        date !== new Date(Number(timestamp) * 1000).toISOString().slice(0, 10) ||
        service !== 'sms'
      )
        return error(
          'AuthFailure.SignatureFailure',
          'The provided credentials could not be validated. Please check your signature is correct.',
        );
      if (
        signature !==
        documentedTc3Signature({ secretKey: account.secretKey, headers, signedHeaders, body, timestamp, date: date!, service: service! })
      )
        return error(
          'AuthFailure.SignatureFailure',
          'The provided credentials could not be validated. Please check your signature is correct.',
        );
      if (headers['x-tc-action'] !== 'SendSms' || headers['x-tc-version'] !== '2021-01-11')
        return error('InvalidAction', 'The action requested does not exist or the version is wrong.');
      if (!headers['x-tc-region']) return error('MissingParameter', 'The request is missing a required parameter `Region`.');

      const p = JSON.parse(body);
      if (p.SmsSdkAppId !== account.sdkAppId) return error('FailedOperation.SmsSdkAppIdVerifyFail', 'SmsSdkAppId verification failed.');
      if (p.SignName !== account.signName)
        return error('FailedOperation.SignatureIncorrectOrUnapproved', 'signature format is incorrect or signature is not approved.');
      if (p.TemplateId !== account.templateId)
        return error('FailedOperation.TemplateIncorrectOrUnapproved', 'template format is incorrect or template is not approved.');
      const phone = String(p.PhoneNumberSet?.[0] ?? '');
      const status = (code: string, message: string) =>
        Response.json({
          Response: {
            SendStatusSet: [
              { SerialNo: randomUUID(), PhoneNumber: phone, Fee: 1, SessionContext: '', Code: code, Message: message, IsoCode: 'CN' },
            ],
            RequestId: randomUUID(),
          },
        });
      if (!/^\+\d{6,20}$/.test(phone)) return status('InvalidParameterValue.IncorrectPhoneNumber', 'incorrect number format');
      if (behaviour.refuseNext) {
        const code = behaviour.refuseNext;
        behaviour.refuseNext = null;
        return status(code, 'the number of sms messages sent from a single mobile number every day exceeds the upper limit');
      }
      messages.push({
        phoneNumberSet: p.PhoneNumberSet,
        signName: p.SignName,
        templateId: p.TemplateId,
        templateParamSet: p.TemplateParamSet,
        region: headers['x-tc-region']!,
      });
      return status('Ok', 'send success');
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    account,
    messages,
    rejected,
    behaviour,
    env: (overrides: Record<string, string> = {}) => ({
      SMS_PROVIDER: 'tencent',
      TENCENT_SMS_URL: `http://127.0.0.1:${server.port}`,
      TENCENT_SECRET_ID: account.secretId,
      TENCENT_SECRET_KEY: account.secretKey,
      TENCENT_SMS_SDK_APP_ID: account.sdkAppId,
      TENCENT_SMS_SIGN_NAME: account.signName,
      TENCENT_SMS_TEMPLATE_ID: account.templateId,
      ...overrides,
    }),
    stop: () => server.stop(true),
  };
}

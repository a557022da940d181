/**
 * The Aliyun and Tencent Cloud SMS senders: held to each provider's published signing example,
 * then driven end to end against local fakes that verify every request's signature on their own
 * (tests/modules/accounts/fakes), capture the code and let the app sign in with it. Provider
 * failures answer 502/503 {error} and leave no usable code.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { aliyunPhoneNumber, aliyunSignature, aliyunStringToSign } from '../../../src/modules/accounts/sms/aliyun';
import { tc3Sign } from '../../../src/modules/accounts/sms/tencent';
import { createTestApp, type TestApp } from '../../support/app';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { freePort } from '../../support/ports';
import { documentedPercentEncode, documentedSignature, startFakeAliyunSms } from './fakes/aliyun-sms';
import { documentedTc3Signature, startFakeTencentSms } from './fakes/tencent-sms';

/**
 * Alibaba Cloud's example of an RPC signature ("Signature mechanism", the ECS DescribeRegions
 * request with AccessKeySecret "testsecret"), and the SMS documentation's SendSms example (Java
 * sample of "HTTP 协议及签名", AccessKeySecret "testSecret", a Chinese SignName).
 */
const ALIYUN_DOC = {
  params: {
    AccessKeyId: 'testid',
    Action: 'DescribeRegions',
    Format: 'XML',
    SignatureMethod: 'HMAC-SHA1',
    SignatureNonce: '3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf',
    SignatureVersion: '1.0',
    Timestamp: '2016-02-23T12:46:24Z',
    Version: '2014-05-26',
  },
  stringToSign:
    'GET&%2F&AccessKeyId%3Dtestid%26Action%3DDescribeRegions%26Format%3DXML%26SignatureMethod%3DHMAC-SHA1%26SignatureNonce%3D3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf%26SignatureVersion%3D1.0%26Timestamp%3D2016-02-23T12%253A46%253A24Z%26Version%3D2014-05-26',
  signature: 'OLeaidS1JvxuMvnyHOwuJ+uX5qY=',
};
const ALIYUN_SMS_DOC = {
  params: {
    AccessKeyId: 'testId',
    Action: 'SendSms',
    Format: 'XML',
    OutId: '123',
    PhoneNumbers: '15300000001',
    RegionId: 'cn-hangzhou',
    SignName: '阿里云短信测试专用',
    SignatureMethod: 'HMAC-SHA1',
    SignatureNonce: '45e25e9b-0a6f-4070-8c85-2956eda1b466',
    SignatureVersion: '1.0',
    TemplateCode: 'SMS_71390007',
    TemplateParam: '{"customer":"test"}',
    Timestamp: '2017-07-12T02:42:19Z',
    Version: '2017-05-25',
  },
  signature: 'zJDF+Lrzhj/ThnlvIToysFRq6t4=',
};
/** Tencent Cloud's "Signature v3" example: CVM DescribeInstances, POST with a JSON body. */
const TENCENT_DOC = {
  secretId: 'AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE',
  secretKey: 'Gu5t9xGARNpq86cd98joQYCN3EXAMPLE',
  service: 'cvm',
  host: 'cvm.tencentcloudapi.com',
  contentType: 'application/json; charset=utf-8',
  body: '{"Limit": 1, "Filters": [{"Values": ["\\u672a\\u547d\\u540d"], "Name": "instance-name"}]}',
  timestamp: 1551113065,
  hashedPayload: '35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064',
  hashedCanonicalRequest: '5ffe6a04c0664d6b969fab9a13bdab201d63ee709638e2749d62a09ca18d7031',
  signature: '72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168',
};

describe('published signing examples', () => {
  test('Aliyun RPC: our signer and the fake’s verifier both give the documented string to sign and signatures', () => {
    expect(aliyunStringToSign('GET', ALIYUN_DOC.params)).toBe(ALIYUN_DOC.stringToSign);
    expect(aliyunSignature('GET', ALIYUN_DOC.params, 'testsecret')).toBe(ALIYUN_DOC.signature);
    expect(documentedSignature('GET', ALIYUN_DOC.params, 'testsecret')).toBe(ALIYUN_DOC.signature);
    expect(aliyunSignature('GET', ALIYUN_SMS_DOC.params, 'testSecret')).toBe(ALIYUN_SMS_DOC.signature);
    expect(documentedSignature('GET', ALIYUN_SMS_DOC.params, 'testSecret')).toBe(ALIYUN_SMS_DOC.signature);
    expect(documentedPercentEncode("a b*~!'()")).toBe('a%20b%2A~%21%27%28%29');
  });

  test('Tencent TC3-HMAC-SHA256: our signer and the fake’s verifier both give the documented signature', () => {
    const signed = tc3Sign(TENCENT_DOC);
    expect(signed.canonicalRequest.split('\n').at(-1)).toBe(TENCENT_DOC.hashedPayload);
    expect(signed.stringToSign).toBe(`TC3-HMAC-SHA256\n1551113065\n2019-02-25/cvm/tc3_request\n${TENCENT_DOC.hashedCanonicalRequest}`);
    expect(signed.signature).toBe(TENCENT_DOC.signature);
    expect(signed.authorization).toBe(
      `TC3-HMAC-SHA256 Credential=${TENCENT_DOC.secretId}/2019-02-25/cvm/tc3_request, SignedHeaders=content-type;host, Signature=${TENCENT_DOC.signature}`,
    );
    const verified = documentedTc3Signature({
      secretKey: TENCENT_DOC.secretKey,
      headers: { 'content-type': TENCENT_DOC.contentType, host: TENCENT_DOC.host },
      signedHeaders: ['content-type', 'host'],
      body: TENCENT_DOC.body,
      timestamp: String(TENCENT_DOC.timestamp),
      date: '2019-02-25',
      service: 'cvm',
    });
    expect(verified).toBe(TENCENT_DOC.signature);
  });

  test('Aliyun takes a mainland number without +86 and any other without its +', () => {
    expect(aliyunPhoneNumber('+8613800000000')).toBe('13800000000');
    expect(aliyunPhoneNumber('+85291234567')).toBe('85291234567');
  });
});

/** The phone_codes rows of `phone` a code could still be used from. */
async function usableCodes(t: TestApp, phone: string) {
  return t.testDb.database.query(sql`select id from phone_codes where phone = ${phone} and used_at is null and expires_at > now()`);
}

describe('SMS_PROVIDER=aliyun against a fake Dysmsapi', () => {
  const fake = startFakeAliyunSms();
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    t = await createTestApp('postgres', fake.env(), { testDb: db });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
    fake.stop();
  });

  test('a signed SendSms carries the code in TemplateParam; the app signs up with it', async () => {
    const phone = '+8613700000001';
    expect((await t.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' } })).status).toBe(202);
    const message = fake.messages.at(-1)!;
    expect(message).toMatchObject({
      phoneNumbers: '13700000001',
      signName: fake.account.signName,
      templateCode: fake.account.templateCode,
    });
    expect(message.templateParam).toEqual({ code: expect.stringMatching(/^\d{6}$/) });
    const res = await t.request('POST', '/api/auth/phone/login', { body: { phone, code: message.templateParam.code } });
    expect(res.status).toBe(201);
    expect(fake.rejected).toEqual([]);
    // The log provider's line is not written for a real provider.
    expect(t.logs.some((l) => l.includes(message.templateParam.code!))).toBe(false);
  });

  test('a wrong AccessKeySecret: Aliyun answers SignatureDoesNotMatch, the app 502 {error}, no code left, no secret in the log', async () => {
    const wrong = await createTestApp('postgres', fake.env({ ALIYUN_ACCESS_KEY_SECRET: 'not-the-secret' }), { testDb: db });
    try {
      const phone = '+8613700000002';
      const res = await wrong.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' } });
      expect(res).toMatchObject({ status: 502, body: { error: 'the SMS provider did not send the code; try again later' } });
      expect(fake.rejected.at(-1)).toBe('SignatureDoesNotMatch');
      expect(await usableCodes(wrong, phone)).toHaveLength(0);
      const line = wrong.logs.find((l) => l.includes('SMS code not sent'))!;
      expect(line).toContain('SignatureDoesNotMatch');
      expect(line).not.toContain('not-the-secret');
    } finally {
      await wrong.close();
    }
  });

  test('a refusal (isv.* Code) is a 502 and leaves nothing usable', async () => {
    const phone = '+8613700000003';
    fake.behaviour.refuseNext = 'isv.BUSINESS_LIMIT_CONTROL';
    const res = await t.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' } });
    expect(res.status).toBe(502);
    expect(await usableCodes(t, phone)).toHaveLength(0);
    expect(t.logs.some((l) => l.includes('isv.BUSINESS_LIMIT_CONTROL'))).toBe(true);
  });

  test('a Chinese sign name the account does not have is refused by the provider, not by us', async () => {
    const other = await createTestApp('postgres', fake.env({ ALIYUN_SMS_SIGN_NAME: '别的签名' }), { testDb: db });
    try {
      expect((await other.request('POST', '/api/auth/phone/code', { body: { phone: '+8613700000004', purpose: 'register' } })).status).toBe(
        502,
      );
      expect(other.logs.some((l) => l.includes('isv.SMS_SIGNATURE_ILLEGAL'))).toBe(true);
    } finally {
      await other.close();
    }
  });

  test('a provider that cannot be reached is a 503', async () => {
    const down = await createTestApp('postgres', fake.env({ ALIYUN_SMS_URL: `http://127.0.0.1:${await freePort()}` }), { testDb: db });
    try {
      const phone = '+8613700000005';
      const res = await down.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' } });
      expect(res).toMatchObject({ status: 503, body: { error: 'the SMS provider cannot be reached; try again later' } });
      expect(await usableCodes(down, phone)).toHaveLength(0);
    } finally {
      await down.close();
    }
  });
});

describe('SMS_PROVIDER=tencent against a fake SMS API 3.0', () => {
  const fake = startFakeTencentSms();
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    t = await createTestApp('postgres', fake.env({ TENCENT_SMS_REGION: 'ap-beijing' }), { testDb: db });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
    fake.stop();
  });

  test('a signed SendSms carries the code in TemplateParamSet; the app signs up with it', async () => {
    const phone = '+8613600000001';
    expect((await t.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' } })).status).toBe(202);
    const message = fake.messages.at(-1)!;
    expect(message).toEqual({
      phoneNumberSet: [phone],
      signName: fake.account.signName,
      templateId: fake.account.templateId,
      templateParamSet: [expect.stringMatching(/^\d{6}$/)],
      region: 'ap-beijing',
    });
    const res = await t.request('POST', '/api/auth/phone/login', { body: { phone, code: message.templateParamSet[0] } });
    expect(res.status).toBe(201);
    expect(fake.rejected).toEqual([]);
  });

  test('a wrong SecretKey: AuthFailure.SignatureFailure, 502 {error}, no code left, no secret in the log', async () => {
    const wrong = await createTestApp('postgres', fake.env({ TENCENT_SECRET_KEY: 'not-the-secret-key' }), { testDb: db });
    try {
      const phone = '+8613600000002';
      const res = await wrong.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' } });
      expect(res).toMatchObject({ status: 502, body: { error: 'the SMS provider did not send the code; try again later' } });
      expect(fake.rejected.at(-1)).toBe('AuthFailure.SignatureFailure');
      expect(await usableCodes(wrong, phone)).toHaveLength(0);
      const line = wrong.logs.find((l) => l.includes('SMS code not sent'))!;
      expect(line).toContain('AuthFailure.SignatureFailure');
      expect(line).not.toContain('not-the-secret-key');
    } finally {
      await wrong.close();
    }
  });

  test('a SendStatusSet Code other than Ok is a 502 and leaves nothing usable', async () => {
    const phone = '+8613600000003';
    fake.behaviour.refuseNext = 'LimitExceeded.PhoneNumberDailyLimit';
    expect((await t.request('POST', '/api/auth/phone/code', { body: { phone, purpose: 'register' } })).status).toBe(502);
    expect(await usableCodes(t, phone)).toHaveLength(0);
    expect(t.logs.some((l) => l.includes('LimitExceeded.PhoneNumberDailyLimit'))).toBe(true);
  });

  test('a template the account does not have: Response.Error is read, 502', async () => {
    const other = await createTestApp('postgres', fake.env({ TENCENT_SMS_TEMPLATE_ID: '1' }), { testDb: db });
    try {
      expect((await other.request('POST', '/api/auth/phone/code', { body: { phone: '+8613600000004', purpose: 'register' } })).status).toBe(
        502,
      );
      expect(fake.rejected.at(-1)).toBe('FailedOperation.TemplateIncorrectOrUnapproved');
    } finally {
      await other.close();
    }
  });
});

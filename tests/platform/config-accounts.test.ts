import { describe, expect, test } from 'bun:test';
import { ConfigError, loadConfig } from '../../src/config';

const remote = { PUBLIC_URL: 'https://cpd.example.com', PAYMENT_MODE: 'sandbox' };
const refusal = (env: Record<string, string>) => {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).message;
  }
  throw new Error('loadConfig accepted it');
};

describe('account settings', () => {
  test('on loopback mail and SMS go to the log and verification is optional', () => {
    const { accounts } = loadConfig({});
    expect(accounts).toEqual({
      mail: { kind: 'log', from: 'cpd <noreply@localhost>' },
      emailVerification: 'optional',
      oauth: { github: null, google: null, oidc: null },
      sms: { provider: 'log' },
    });
  });

  test('on a public site nothing is sent until configured', () => {
    const { accounts } = loadConfig(remote);
    expect(accounts.mail).toBeNull();
    expect(accounts.sms).toBeNull();
    expect(accounts.emailVerification).toBe('off');
    expect(refusal({ ...remote, EMAIL_VERIFICATION: 'required' })).toContain('SMTP_URL');
  });

  test('SMTP_URL is checked without echoing its password', () => {
    const c = loadConfig({ ...remote, SMTP_URL: 'smtps://u:pw@mail.example.com:465', MAIL_FROM: 'Ops <ops@example.com>', EMAIL_VERIFICATION: 'required' });
    expect(c.accounts.mail).toEqual({ kind: 'smtp', url: 'smtps://u:pw@mail.example.com:465', from: 'Ops <ops@example.com>' });
    expect(c.accounts.emailVerification).toBe('required');
    const message = refusal({ ...remote, SMTP_URL: 'http://u:s3cret@mail.example.com' });
    expect(message).toContain('SMTP_URL');
    expect(message).not.toContain('s3cret');
    expect(c.runtime.childEnv.SMTP_URL).toBeUndefined();
  });

  test('a provider is on with both its client id and secret', () => {
    const c = loadConfig({ GITHUB_CLIENT_ID: 'gh', GITHUB_CLIENT_SECRET: 'ghs', OIDC_ISSUER: 'https://id.example.com', OIDC_CLIENT_ID: 'o', OIDC_CLIENT_SECRET: 'os', OIDC_NAME: 'Corp SSO' });
    expect(c.accounts.oauth.github).toEqual({ clientId: 'gh', clientSecret: 'ghs', authUrl: 'https://github.com', apiUrl: 'https://api.github.com' });
    expect(c.accounts.oauth.oidc).toMatchObject({ issuer: 'https://id.example.com', name: 'Corp SSO' });
    expect(refusal({ GOOGLE_CLIENT_ID: 'g' })).toContain('GOOGLE_CLIENT_SECRET');
    expect(refusal({ OIDC_CLIENT_ID: 'o', OIDC_CLIENT_SECRET: 'os' })).toContain('OIDC_ISSUER');
  });

  test('an SMS provider needs its credentials', () => {
    expect(refusal({ SMS_PROVIDER: 'aliyun' })).toContain('ALIYUN_ACCESS_KEY_ID');
    expect(refusal({ SMS_PROVIDER: 'carrier-pigeon' })).toContain('SMS_PROVIDER');
    const c = loadConfig({
      SMS_PROVIDER: 'tencent',
      TENCENT_SECRET_ID: 'id',
      TENCENT_SECRET_KEY: 'key',
      TENCENT_SMS_SDK_APP_ID: '1400000000',
      TENCENT_SMS_SIGN_NAME: 'cpd',
      TENCENT_SMS_TEMPLATE_ID: '123',
    });
    expect(c.accounts.sms).toMatchObject({ provider: 'tencent', region: 'ap-guangzhou', url: 'https://sms.tencentcloudapi.com' });
  });
});

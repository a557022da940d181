/**
 * Settings of the public accounts: mail, email verification, OAuth/OpenID Connect providers and
 * SMS codes. Each provider is on when its credentials are set; on a loopback PUBLIC_URL mail and
 * SMS default to the log (a developer sees the message and the code without a provider), anywhere
 * else they are off until configured, so a default never sends from an unconfigured site.
 */
import { ConfigError, fail, httpUrl, oneOf } from './config-parse';

export type MailSettings = { kind: 'smtp'; url: string; from: string } | { kind: 'log'; from: string };

export interface OAuthClient {
  clientId: string;
  clientSecret: string;
}

export interface OAuthSettings {
  /** GITHUB_CLIENT_ID/SECRET; `authUrl` is GitHub's web host (GITHUB_OAUTH_URL), `apiUrl` its REST API (GITHUB_API_URL). */
  github: (OAuthClient & { authUrl: string; apiUrl: string }) | null;
  /** GOOGLE_CLIENT_ID/SECRET; Google is an OpenID provider found at `issuer` (GOOGLE_ISSUER). */
  google: (OAuthClient & { issuer: string }) | null;
  /** Any OpenID provider: OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_NAME (the button's label). */
  oidc: (OAuthClient & { issuer: string; name: string }) | null;
}

export type SmsSettings =
  | { provider: 'log' }
  | { provider: 'aliyun'; accessKeyId: string; accessKeySecret: string; signName: string; templateCode: string; url: string }
  | { provider: 'tencent'; secretId: string; secretKey: string; sdkAppId: string; signName: string; templateId: string; region: string; url: string };

export interface AccountSettings {
  /** null: no mail; features that need it are off. */
  mail: MailSettings | null;
  emailVerification: 'off' | 'optional' | 'required';
  oauth: OAuthSettings;
  /** null: no phone codes. */
  sms: SmsSettings | null;
}

type Get = (name: string) => string | undefined;

export function accountSettings(get: Get, publicUrl: string, loopback: boolean): AccountSettings {
  const mail = mailSettings(get, publicUrl, loopback);
  const verification = oneOf('EMAIL_VERIFICATION', get('EMAIL_VERIFICATION') ?? (mail ? 'optional' : 'off'), ['off', 'optional', 'required'] as const);
  if (verification !== 'off' && !mail) throw new ConfigError('EMAIL_VERIFICATION', `${verification} needs mail: set SMTP_URL`);
  return { mail, emailVerification: verification, oauth: oauthSettings(get), sms: smsSettings(get, loopback) };
}

function mailSettings(get: Get, publicUrl: string, loopback: boolean): MailSettings | null {
  const raw = get('SMTP_URL') ?? (loopback ? 'log:' : undefined);
  const from = get('MAIL_FROM') ?? `cpd <noreply@${new URL(publicUrl).hostname}>`;
  if (raw === undefined) return null;
  if (raw === 'log:') return { kind: 'log', from };
  // The URL carries the password: it is never echoed in an error.
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('SMTP_URL', 'must be smtp://[user:pass@]host[:port], smtps://… or log:');
  }
  if ((url.protocol !== 'smtp:' && url.protocol !== 'smtps:') || !url.hostname) throw new ConfigError('SMTP_URL', 'must be smtp://[user:pass@]host[:port], smtps://… or log:');
  return { kind: 'smtp', url: raw, from };
}

function client(get: Get, prefix: string): OAuthClient | null {
  const clientId = get(`${prefix}_CLIENT_ID`);
  const clientSecret = get(`${prefix}_CLIENT_SECRET`);
  if (!clientId && !clientSecret) return null;
  if (!clientId) throw new ConfigError(`${prefix}_CLIENT_ID`, `is required with ${prefix}_CLIENT_SECRET`);
  if (!clientSecret) throw new ConfigError(`${prefix}_CLIENT_SECRET`, `is required with ${prefix}_CLIENT_ID`);
  return { clientId, clientSecret };
}

function oauthSettings(get: Get): OAuthSettings {
  const github = client(get, 'GITHUB');
  const google = client(get, 'GOOGLE');
  const oidc = client(get, 'OIDC');
  const issuer = get('OIDC_ISSUER');
  if (oidc && !issuer) throw new ConfigError('OIDC_ISSUER', 'is required with OIDC_CLIENT_ID (the provider’s issuer URL)');
  return {
    github: github && {
      ...github,
      authUrl: httpUrl('GITHUB_OAUTH_URL', get('GITHUB_OAUTH_URL') ?? 'https://github.com'),
      apiUrl: httpUrl('GITHUB_API_URL', get('GITHUB_API_URL') ?? 'https://api.github.com'),
    },
    google: google && { ...google, issuer: httpUrl('GOOGLE_ISSUER', get('GOOGLE_ISSUER') ?? 'https://accounts.google.com') },
    oidc: oidc && { ...oidc, issuer: httpUrl('OIDC_ISSUER', issuer!), name: get('OIDC_NAME') ?? 'OpenID Connect' },
  };
}

function smsSettings(get: Get, loopback: boolean): SmsSettings | null {
  const raw = get('SMS_PROVIDER') ?? (loopback ? 'log' : undefined);
  if (raw === undefined) return null;
  const provider = oneOf('SMS_PROVIDER', raw, ['aliyun', 'tencent', 'log'] as const);
  const need = (name: string) => get(name) ?? fail(name, `is required with SMS_PROVIDER=${provider}`);
  if (provider === 'log') return { provider };
  if (provider === 'aliyun')
    return {
      provider,
      accessKeyId: need('ALIYUN_ACCESS_KEY_ID'),
      accessKeySecret: need('ALIYUN_ACCESS_KEY_SECRET'),
      signName: need('ALIYUN_SMS_SIGN_NAME'),
      templateCode: need('ALIYUN_SMS_TEMPLATE_CODE'),
      url: httpUrl('ALIYUN_SMS_URL', get('ALIYUN_SMS_URL') ?? 'https://dysmsapi.aliyuncs.com'),
    };
  return {
    provider,
    secretId: need('TENCENT_SECRET_ID'),
    secretKey: need('TENCENT_SECRET_KEY'),
    sdkAppId: need('TENCENT_SMS_SDK_APP_ID'),
    signName: need('TENCENT_SMS_SIGN_NAME'),
    templateId: need('TENCENT_SMS_TEMPLATE_ID'),
    region: get('TENCENT_SMS_REGION') ?? 'ap-guangzhou',
    url: httpUrl('TENCENT_SMS_URL', get('TENCENT_SMS_URL') ?? 'https://sms.tencentcloudapi.com'),
  };
}

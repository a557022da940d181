/**
 * Environment → typed, validated Config, read once at start-up; every variable is optional and a bad value stops start-up with one line naming it.
 * A bad value throws ConfigError naming the variable; the CLI prints it and exits 2.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import { type LimitName, parseRateLimits, type RateLimit } from './platform/http/rate-limit';

export type Site = 'intl' | 'cn';
export type PaymentProviderId = 'card' | 'chat_wallet' | 'app_wallet';
export type Component = 'engine' | 'router' | 'agent' | 'memo';

export interface Config {
  site: Site;
  currency: 'USD' | 'CNY';
  host: string;
  port: number;
  publicUrl: string;
  databaseUrl: string | null;
  dataDir: string;
  storageUrl: string;
  s3: { endpoint: string | null; region: string | null; accessKeyId: string | null; secretAccessKey: string | null };
  /** SECRET_KEY, or one generated once into DATA_DIR/secret_key. Read lazily: `migrate` needs none. */
  secretKey: () => string;
  sessionTtlMs: number;
  presignTtlMs: number;
  paymentProviders: PaymentProviderId[];
  paymentMode: 'sandbox' | 'live';
  /** Live-mode credentials of each enabled provider (null in sandbox mode or when not enabled). */
  paymentCredentials: PaymentCredentials;
  /** How long failed and expired payments are still asked about at their provider (PAYMENT_RECHECK_WINDOW). */
  paymentRecheckWindowMs: number;
  topupMin: number;
  topupMax: number;
  /** MODEL_BACKENDS: upstream base URLs per model slug, each with the API key named by `#env:VAR` (or none). */
  modelBackends: Record<string, ConfiguredBackend[]>;
  routes: string | null;
  releaseSource: 'github' | 'mirror';
  githubApiUrl: string;
  githubToken: string | null;
  releaseRepos: Record<Component, string>;
  releaseMirrorUrl: string | null;
  agentCloudApiKey: string | null;
  usdPerCny: number;
  registration: 'open' | 'closed';
  trustProxy: boolean;
  /** RATE_LIMITS overrides of the named limits (platform/http/rate-limit.ts has the defaults). */
  rateLimits: Partial<Record<LimitName, RateLimit>>;
  engines: string | null;
  /** METRICS_TOKEN: the bearer token GET /metrics asks for; null: loopback clients only. */
  metricsToken: string | null;
  /** Prompt tokens the admission counts for each image part of a request (IMAGE_TOKENS). */
  imageTokens: number;
  /** Completion tokens the admission counts for a request that sets no max_tokens (ADMISSION_DEFAULT_MAX_TOKENS). */
  admissionDefaultMaxTokens: number;
  /** How long a wallet grant lives unless its process renews it (WALLET_GRANT_TTL). */
  walletGrantTtlMs: number;
  /** Whether a usage commit waits for PostgreSQL's WAL flush (USAGE_SYNCHRONOUS_COMMIT, default on). */
  usageSynchronousCommit: boolean;
  logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent';
  env: Record<string, string | undefined>;
}

export interface ConfiguredBackend {
  url: string;
  apiKey: string | null;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "12h", "300s", "1500ms", or a bare number of seconds. */
export function parseDuration(variable: string, raw: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!m) throw new ConfigError(variable, `"${raw}" is not a duration (examples: 300s, 12h)`);
  const ms = Number(m[1]) * DURATION_UNITS[m[2] ?? 's']!;
  if (!(ms > 0) || !Number.isFinite(ms)) throw new ConfigError(variable, 'must be a positive duration');
  return ms;
}

function number(variable: string, raw: string, opts: { min?: number; max?: number; integer?: boolean } = {}): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw new ConfigError(variable, `"${raw}" is not a number`);
  if (opts.integer && !Number.isInteger(n)) throw new ConfigError(variable, `"${raw}" is not an integer`);
  if (opts.min !== undefined && n < opts.min) throw new ConfigError(variable, `must be at least ${opts.min}`);
  if (opts.max !== undefined && n > opts.max) throw new ConfigError(variable, `must be at most ${opts.max}`);
  return n;
}

function oneOf<T extends string>(variable: string, raw: string, values: readonly T[]): T {
  if (!(values as readonly string[]).includes(raw)) throw new ConfigError(variable, `"${raw}" is not one of ${values.join(', ')}`);
  return raw as T;
}

function httpUrl(variable: string, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(variable, `"${raw}" is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(variable, 'must be an http(s) URL');
  return raw.replace(/\/+$/, '');
}

/** `a=x,b=y` → {a: x, b: y}; a key may repeat (several backends for one model). */
function pairs(variable: string, raw: string): Array<[string, string]> {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const i = entry.indexOf('=');
      if (i <= 0 || i === entry.length - 1) throw new ConfigError(variable, `"${entry}" is not name=value`);
      return [entry.slice(0, i).trim(), entry.slice(i + 1).trim()] as [string, string];
    });
}

/** `url` or `url#env:VAR`: the backend's API key is read from VAR (never written in MODEL_BACKENDS itself). */
function configuredBackend(value: string, get: (name: string) => string | undefined): ConfiguredBackend {
  const at = value.indexOf('#');
  if (at < 0) return { url: httpUrl('MODEL_BACKENDS', value), apiKey: null };
  const ref = /^env:([A-Za-z_][A-Za-z0-9_]*)$/.exec(value.slice(at + 1));
  if (!ref) // The text after # is not echoed: it may be a key written inline by mistake.
  if (!ref) throw new ConfigError('MODEL_BACKENDS', `what follows # in a backend must be #env:VARIABLE (the variable holding its API key)`);
  const apiKey = get(ref[1]!);
  if (apiKey === undefined) throw new ConfigError('MODEL_BACKENDS', `${ref[1]} (named by #env:) is not set`);
  return { url: httpUrl('MODEL_BACKENDS', value.slice(0, at)), apiKey };
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const get = (name: string) => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };
  const site = oneOf('SITE', get('SITE') ?? 'intl', ['intl', 'cn'] as const);
  const port = number('PORT', get('PORT') ?? '8080', { min: 0, max: 65535, integer: true });
  const host = get('HOST') ?? '0.0.0.0';
  const publicUrl = httpUrl('PUBLIC_URL', get('PUBLIC_URL') ?? `http://localhost:${port}`);

  const databaseUrl = get('DATABASE_URL') ?? null;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl))
    throw new ConfigError('DATABASE_URL', 'must start with postgres:// or postgresql://');

  const dataDir = resolve(get('DATA_DIR') ?? './data');
  const storageUrl = get('STORAGE_URL') ?? `file://${join(dataDir, 'objects')}`;
  if (!/^(file|s3):\/\/./.test(storageUrl)) throw new ConfigError('STORAGE_URL', 'must be file://PATH or s3://bucket[/prefix]');

  const allProviders = ['card', 'chat_wallet', 'app_wallet'] as const;
  const paymentProviders = (get('PAYMENT_PROVIDERS') ?? (site === 'intl' ? 'card' : 'chat_wallet,app_wallet'))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((p) => oneOf('PAYMENT_PROVIDERS', p, allProviders));

  const paymentMode = oneOf('PAYMENT_MODE', get('PAYMENT_MODE') ?? 'sandbox', ['sandbox', 'live'] as const);
  const topupMin = number('TOPUP_MIN', get('TOPUP_MIN') ?? '1', { min: 0.01 });
  const topupMax = number('TOPUP_MAX', get('TOPUP_MAX') ?? '10000', { min: 0.01 });
  if (topupMax < topupMin) throw new ConfigError('TOPUP_MAX', 'must not be below TOPUP_MIN');

  const modelBackends: Record<string, ConfiguredBackend[]> = {};
  for (const [slug, value] of pairs('MODEL_BACKENDS', get('MODEL_BACKENDS') ?? '')) {
    modelBackends[slug] = [...(modelBackends[slug] ?? []), configuredBackend(value, get)];
  }

  const defaultRepos: Record<Component, string> = {
    engine: 'ariacompute/engine',
    router: 'ariacompute/router',
    agent: 'ariacompute/agent',
    memo: 'ariacompute/memo',
  };
  const releaseRepos = { ...defaultRepos };
  for (const [component, repo] of pairs('RELEASE_REPOS', get('RELEASE_REPOS') ?? '')) {
    oneOf('RELEASE_REPOS', component, ['engine', 'router', 'agent', 'memo'] as const);
    if (!/^[\w.-]+\/[\w.-]+$/.test(repo)) throw new ConfigError('RELEASE_REPOS', `"${repo}" is not owner/repo`);
    releaseRepos[component as Component] = repo;
  }
  const releaseMirrorUrl = get('RELEASE_MIRROR_URL') ? httpUrl('RELEASE_MIRROR_URL', get('RELEASE_MIRROR_URL')!) : null;

  const secretFromEnv = get('SECRET_KEY');
  if (secretFromEnv !== undefined && secretFromEnv.length < 32)
    throw new ConfigError('SECRET_KEY', 'must be at least 32 characters');
  let secret: string | undefined = secretFromEnv;
  const secretKey = () => (secret ??= readOrCreateSecret(dataDir));

  return {
    site,
    currency: site === 'intl' ? 'USD' : 'CNY',
    host,
    port,
    publicUrl,
    databaseUrl,
    dataDir,
    storageUrl,
    s3: {
      endpoint: get('S3_ENDPOINT') ?? null,
      region: get('S3_REGION') ?? null,
      accessKeyId: get('S3_ACCESS_KEY_ID') ?? null,
      secretAccessKey: get('S3_SECRET_ACCESS_KEY') ?? null,
    },
    secretKey,
    sessionTtlMs: parseDuration('SESSION_TTL', get('SESSION_TTL') ?? '12h'),
    presignTtlMs: parseDuration('PRESIGN_TTL', get('PRESIGN_TTL') ?? '300s'),
    paymentProviders,
    paymentMode,
    paymentCredentials: paymentCredentials(get, paymentMode === 'live' ? paymentProviders : []),
    paymentRecheckWindowMs: parseDuration('PAYMENT_RECHECK_WINDOW', get('PAYMENT_RECHECK_WINDOW') ?? '24h'),
    topupMin,
    topupMax,
    modelBackends,
    routes: get('ROUTES') ?? null,
    releaseSource: oneOf('RELEASE_SOURCE', get('RELEASE_SOURCE') ?? (site === 'intl' ? 'github' : 'mirror'), [
      'github',
      'mirror',
    ] as const),
    githubApiUrl: httpUrl('GITHUB_API_URL', get('GITHUB_API_URL') ?? 'https://api.github.com'),
    githubToken: get('GITHUB_TOKEN') ?? null,
    releaseRepos,
    releaseMirrorUrl,
    agentCloudApiKey: get('AGENT_CLOUD_API_KEY') ?? null,
    usdPerCny: number('USD_PER_CNY', get('USD_PER_CNY') ?? '0.14', { min: 0.000001 }),
    registration: oneOf('REGISTRATION', get('REGISTRATION') ?? 'open', ['open', 'closed'] as const),
    trustProxy: oneOf('TRUST_PROXY', get('TRUST_PROXY') ?? 'false', ['true', 'false'] as const) === 'true',
    rateLimits: rateLimitsFrom(get('RATE_LIMITS')),
    engines: get('ENGINES') ?? null,
    metricsToken: metricsToken(get('METRICS_TOKEN')),
    imageTokens: number('IMAGE_TOKENS', get('IMAGE_TOKENS') ?? '1500', { min: 1, integer: true }),
    admissionDefaultMaxTokens: number('ADMISSION_DEFAULT_MAX_TOKENS', get('ADMISSION_DEFAULT_MAX_TOKENS') ?? '4096', { min: 1, integer: true }),
    walletGrantTtlMs: parseDuration('WALLET_GRANT_TTL', get('WALLET_GRANT_TTL') ?? '30s'),
    usageSynchronousCommit: oneOf('USAGE_SYNCHRONOUS_COMMIT', get('USAGE_SYNCHRONOUS_COMMIT') ?? 'on', ['on', 'off'] as const) === 'on',
    logLevel: oneOf('LOG_LEVEL', get('LOG_LEVEL') ?? 'info', ['debug', 'info', 'warn', 'error', 'silent'] as const),
    env,
  };
}

function metricsToken(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  if (raw.length < 16) throw new ConfigError('METRICS_TOKEN', 'must be at least 16 characters');
  return raw;
}

function rateLimitsFrom(raw: string | undefined) {
  if (!raw) return {};
  try {
    return parseRateLimits(raw, (d) => parseDuration('RATE_LIMITS', d));
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError('RATE_LIMITS', (err as Error).message);
  }
}

export interface PaymentCredentials {
  card: { secretKey: string; webhookSecret: string; apiUrl: string } | null;
  chatWallet: {
    appId: string;
    mchId: string;
    mchSerialNo: string;
    mchPrivateKey: string;
    apiV3Key: string;
    platformPublicKey: string;
    apiUrl: string;
  } | null;
  appWallet: { appId: string; privateKey: string; alipayPublicKey: string; gatewayUrl: string } | null;
}

/** PAYMENT_MODE=live: every enabled provider's credentials must be present and well formed. */
function paymentCredentials(get: (name: string) => string | undefined, live: PaymentProviderId[]): PaymentCredentials {
  const need = (name: string) => get(name) ?? fail(name, 'is required when PAYMENT_MODE=live enables this provider');
  // A PEM given inline (literal "\n" allowed, for env files) or as a path to a PEM file.
  const pem = (name: string, kind: 'private' | 'public') => {
    const raw = need(name);
    const text = raw.includes('-----BEGIN') ? raw.replace(/\\n/g, '\n') : existsSync(raw) ? readFileSync(raw, 'utf8') : fail(name, 'is neither a PEM key nor a readable file');
    try {
      (kind === 'private' ? createPrivateKey : createPublicKey)(text);
    } catch {
      fail(name, `is not a valid ${kind} key (PEM)`);
    }
    return text;
  };
  const apiV3Key = (name: string) => {
    const v = need(name);
    return Buffer.byteLength(v) === 32 ? v : fail(name, 'must be the 32-byte APIv3 key');
  };
  return {
    card: live.includes('card')
      ? { secretKey: need('STRIPE_SECRET_KEY'), webhookSecret: need('STRIPE_WEBHOOK_SECRET'), apiUrl: httpUrl('STRIPE_API_URL', get('STRIPE_API_URL') ?? 'https://api.stripe.com') }
      : null,
    chatWallet: live.includes('chat_wallet')
      ? {
          appId: need('WECHAT_APP_ID'),
          mchId: need('WECHAT_MCH_ID'),
          mchSerialNo: need('WECHAT_MCH_SERIAL_NO'),
          mchPrivateKey: pem('WECHAT_MCH_PRIVATE_KEY', 'private'),
          apiV3Key: apiV3Key('WECHAT_API_V3_KEY'),
          platformPublicKey: pem('WECHAT_PLATFORM_PUBLIC_KEY', 'public'),
          apiUrl: httpUrl('WECHAT_API_URL', get('WECHAT_API_URL') ?? 'https://api.mch.weixin.qq.com'),
        }
      : null,
    appWallet: live.includes('app_wallet')
      ? {
          appId: need('ALIPAY_APP_ID'),
          privateKey: pem('ALIPAY_PRIVATE_KEY', 'private'),
          alipayPublicKey: pem('ALIPAY_PUBLIC_KEY', 'public'),
          gatewayUrl: httpUrl('ALIPAY_GATEWAY_URL', get('ALIPAY_GATEWAY_URL') ?? 'https://openapi.alipay.com/gateway.do'),
        }
      : null,
  };
}

function fail(variable: string, message: string): never {
  throw new ConfigError(variable, message);
}

function readOrCreateSecret(dataDir: string): string {
  const file = join(dataDir, 'secret_key');
  if (existsSync(file)) return readSecretFile(file);
  const value = randomBytes(32).toString('base64url');
  // wx: two processes racing on first start keep whichever wrote first.
  try {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
    return value;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return readSecretFile(file);
    throw new ConfigError('DATA_DIR', `cannot write ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** The generated key file, held to SECRET_KEY's rule: an empty or truncated file is no key. */
function readSecretFile(file: string): string {
  let value: string;
  try {
    value = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ConfigError('DATA_DIR', `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (value.length < 32)
    throw new ConfigError('SECRET_KEY', `${file} holds ${value.length ? 'fewer than 32 characters' : 'nothing'}: restore it, or delete it to generate a new key (signed links and sandbox payments in flight stop working)`);
  return value;
}

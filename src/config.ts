/**
 * Environment → typed, validated Config: the one place the environment is read, once, at
 * start-up. A bad value throws ConfigError naming the variable; the CLI prints it and exits 2.
 * Modules get their typed slice (`config.router`, `config.gateway`, `config.runtime`, …) and never
 * see the raw environment.
 *
 * Adding a variable:
 *   1. read it in loadConfig below with `get('NAME')` through a checker of config-parse.ts
 *      (number, oneOf, httpUrl, pairs, parseDuration), its default beside it;
 *   2. put the typed value in the Config slice of the module that uses it (a module with many
 *      settings gets a parser taking `get` in the config layer, as config-router.ts is for the
 *      router, and loadConfig calls it: config sits below the modules and imports none of them);
 *   3. add it to docs/configuration.md and, when operators set it, to the README table.
 * A check that involves several variables (PAYMENT_MODE and PUBLIC_URL, PAYMENT_PROVIDERS and
 * SITE) sits right after the reads it needs, throwing ConfigError for the variable to change.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, fail, httpUrl, number, oneOf, pairs, parseDuration } from './config-parse';
import { type AccountSettings, accountSettings } from './config-accounts';
import { type RouterSettings, routerSettings } from './config-router';
import { type WebhookSettings, webhookSettings } from './config-webhooks';
import { nodeCrypto, randomBytes } from './platform/crypto';
import { type LimitName, parseRateLimits, type RateLimit } from './platform/limits';
import type { PlatformConfig } from './platform/platform-config';

export { ConfigError, parseDuration } from './config-parse';

export type Site = 'intl' | 'cn';
export type PaymentProviderId = 'card' | 'chat_wallet' | 'app_wallet';
export type Component = 'engine' | 'router' | 'agent' | 'memo';

export interface Config extends PlatformConfig {
  site: Site;
  currency: 'USD' | 'CNY';
  host: string;
  port: number;
  publicUrl: string;
  databaseUrl: string | null;
  /** DATABASE_READ_URL: a read replica for reports (cost report, usage log, CSV export); null reads the main database. */
  databaseReadUrl: string | null;
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
  /**
   * Whether a usage commit waits for PostgreSQL's WAL flush (USAGE_SYNCHRONOUS_COMMIT, default on:
   * with off, a crash of the PostgreSQL server can lose the usage of answers already sent; docs/design/usage-commit.md).
   */
  usageSynchronousCommit: boolean;
  /**
   * USAGE_JOURNAL (default off): on, a request's usage row is appended to a journal in DATA_DIR
   * before its answer ends, and committed right after; the journal survives the death of cpd
   * (docs/design/usage-journal.md).
   */
  usageJournal: boolean;
  logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent';
  /** Mail, email verification, OAuth/OIDC providers and SMS codes (config-accounts.ts). */
  accounts: AccountSettings;
  router: RouterSettings;
  /** WEBHOOK_ALLOW_PRIVATE (config-webhooks.ts). */
  webhooks: WebhookSettings;
  gateway: { maxBodyBytes: number };
  runtime: RuntimeSettings;
}

export interface ConfiguredBackend {
  url: string;
  apiKey: string | null;
  /** Set when the URL was written `anthropic+https://…`: a Messages API backend (otherwise OpenAI-compatible). */
  format?: 'anthropic';
}

/** Where the engine and router runtimes are, when not the installed `current` version. */
export interface RuntimeSettings {
  /** ARIA_ENGINE_BIN, ARIA_ROUTER_BIN, ARIA_FFI_LIB, ARIA_ROUTER_FFI_LIB (null: the installed one). */
  engineBin: string | null;
  routerBin: string | null;
  engineLib: string | null;
  routerLib: string | null;
  /** ARIA_ROUTER=supervise: also run the installed aria router. */
  superviseRouter: boolean;
  /** The environment engine processes inherit: the server's, without its secrets (engines need none). */
  childEnv: Record<string, string | undefined>;
}

const SECRET_NAME = /SECRET|TOKEN|PASSWORD|CREDENTIAL|_KEY$|^DATABASE_URL$|^SMTP_URL$/i;

/** True for http(s)://localhost, 127.0.0.0/8 and [::1]: a site only this machine can reach. */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname;
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** Which site a payment provider belongs to: its currency is that site's. */
export const PROVIDER_SITE: Record<PaymentProviderId, Site> = { card: 'intl', chat_wallet: 'cn', app_wallet: 'cn' };

const DEFAULT_GATEWAY_MAX_BODY = 4 * 1024 * 1024;

/**
 * `url` or `url#env:VAR`: the backend's API key is read from VAR (never written in MODEL_BACKENDS
 * itself). A URL written `anthropic+https://…` is an Anthropic Messages API backend.
 */
function configuredBackend(raw: string, get: (name: string) => string | undefined): ConfiguredBackend {
  const anthropic = raw.startsWith(ANTHROPIC_PREFIX);
  const value = anthropic ? raw.slice(ANTHROPIC_PREFIX.length) : raw;
  const format = anthropic ? { format: 'anthropic' as const } : {};
  const at = value.indexOf('#');
  if (at < 0) return { url: httpUrl('MODEL_BACKENDS', value), apiKey: null, ...format };
  const ref = /^env:([A-Za-z_][A-Za-z0-9_]*)$/.exec(value.slice(at + 1));
  // The text after # is not echoed: it may be a key written inline by mistake.
  if (!ref) throw new ConfigError('MODEL_BACKENDS', `what follows # in a backend must be #env:VARIABLE (the variable holding its API key)`);
  const apiKey = get(ref[1]!);
  if (apiKey === undefined) throw new ConfigError('MODEL_BACKENDS', `${ref[1]} (named by #env:) is not set`);
  return { url: httpUrl('MODEL_BACKENDS', value.slice(0, at)), apiKey, ...format };
}

const ANTHROPIC_PREFIX = 'anthropic+';


export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const get = (name: string) => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };
  // The deploy/ templates mark what the operator must fill in; a forgotten one must not become a
  // publicly known key or a credential that fails at the first payment.
  for (const [name, value] of Object.entries(env))
    if (value?.startsWith('CHANGE-ME')) throw new ConfigError(name, 'still holds the template placeholder CHANGE-ME: set a real value');
  const site = oneOf('SITE', get('SITE') ?? 'intl', ['intl', 'cn'] as const);
  const port = number('PORT', get('PORT') ?? '8080', { min: 0, max: 65535, integer: true });
  const host = get('HOST') ?? '0.0.0.0';
  const publicUrl = httpUrl('PUBLIC_URL', get('PUBLIC_URL') ?? `http://localhost:${port}`);

  const databaseUrl = get('DATABASE_URL') ?? null;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl))
    throw new ConfigError('DATABASE_URL', 'must start with postgres:// or postgresql://');
  const databaseReadUrl = get('DATABASE_READ_URL') ?? null;
  if (databaseReadUrl && !/^postgres(ql)?:\/\//.test(databaseReadUrl))
    throw new ConfigError('DATABASE_READ_URL', 'must start with postgres:// or postgresql://');
  // The embedded database has no replicas: a read URL next to it would be a second, unrelated database.
  if (databaseReadUrl && !databaseUrl) throw new ConfigError('DATABASE_READ_URL', 'needs DATABASE_URL (a replica of that PostgreSQL database)');

  const dataDir = resolve(get('DATA_DIR') ?? './data');
  const storageUrl = get('STORAGE_URL') ?? `file://${join(dataDir, 'objects')}`;
  if (!/^(file|s3):\/\/./.test(storageUrl)) throw new ConfigError('STORAGE_URL', 'must be file://PATH or s3://bucket[/prefix]');

  const allProviders = ['card', 'chat_wallet', 'app_wallet'] as const;
  const paymentProviders = (get('PAYMENT_PROVIDERS') ?? (site === 'intl' ? 'card' : 'chat_wallet,app_wallet'))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((p) => oneOf('PAYMENT_PROVIDERS', p, allProviders));

  for (const p of paymentProviders)
    if (PROVIDER_SITE[p] !== site) throw new ConfigError('PAYMENT_PROVIDERS', `${p} is a provider of the ${PROVIDER_SITE[p]} site, not of SITE=${site}`);

  // Sandbox payments credit wallets for free: the default only where nobody else can reach the site.
  const explicitMode = get('PAYMENT_MODE');
  if (explicitMode === undefined && !isLoopbackUrl(publicUrl))
    throw new ConfigError('PAYMENT_MODE', 'must be set (live, or sandbox for a test site) when PUBLIC_URL is not loopback');
  const paymentMode = oneOf('PAYMENT_MODE', explicitMode ?? 'sandbox', ['sandbox', 'live'] as const);
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
  const routes = get('ROUTES') ?? null;
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
    databaseReadUrl,
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
    usageJournal: oneOf('USAGE_JOURNAL', get('USAGE_JOURNAL') ?? 'off', ['on', 'off'] as const) === 'on',
    logLevel: oneOf('LOG_LEVEL', get('LOG_LEVEL') ?? 'info', ['debug', 'info', 'warn', 'error', 'silent'] as const),
    accounts: accountSettings(get, publicUrl, isLoopbackUrl(publicUrl)),
    router: routerSettings(get, routes, modelBackends),
    webhooks: webhookSettings(get),
    gateway: {
      maxBodyBytes: get('GATEWAY_MAX_BODY') ? number('GATEWAY_MAX_BODY', get('GATEWAY_MAX_BODY')!, { min: 1024, integer: true }) : DEFAULT_GATEWAY_MAX_BODY,
    },
    runtime: {
      engineBin: get('ARIA_ENGINE_BIN') ?? null,
      routerBin: get('ARIA_ROUTER_BIN') ?? null,
      engineLib: get('ARIA_FFI_LIB') ?? null,
      routerLib: get('ARIA_ROUTER_FFI_LIB') ?? null,
      superviseRouter: get('ARIA_ROUTER') !== undefined && oneOf('ARIA_ROUTER', get('ARIA_ROUTER')!, ['supervise'] as const) === 'supervise',
      // process.env too: tests pass a partial environment, and engines still need PATH and HOME.
      childEnv: Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([name]) => !SECRET_NAME.test(name))),
    },
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
      const { createPrivateKey, createPublicKey } = nodeCrypto();
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

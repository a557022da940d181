import { afterAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, loadConfig, parseDuration } from '../../src/config';

const dataDir = mkdtempSync(join(tmpdir(), 'cpd-config-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('loadConfig', () => {
  test('defaults for the international site', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      site: 'intl',
      currency: 'USD',
      host: '0.0.0.0',
      port: 8080,
      publicUrl: 'http://localhost:8080',
      databaseUrl: null,
      dataDir: resolve('./data'),
      storageUrl: `file://${resolve('./data/objects')}`,
      sessionTtlMs: 12 * 3_600_000,
      presignTtlMs: 300_000,
      paymentProviders: ['card'],
      paymentMode: 'sandbox',
      paymentRecheckWindowMs: 24 * 3_600_000,
      topupMin: 1,
      topupMax: 10_000,
      modelBackends: {},
      releaseSource: 'github',
      agentCloudApiKey: null,
      usdPerCny: 0.14,
      registration: 'open',
      trustProxy: false,
      logLevel: 'info',
      usageSynchronousCommit: true,
      usageJournal: false,
    });
  });

  test('the China site switches currency, providers and release source', () => {
    const c = loadConfig({ SITE: 'cn' });
    expect(c).toMatchObject({ site: 'cn', currency: 'CNY', paymentProviders: ['chat_wallet', 'app_wallet'], releaseSource: 'mirror' });
  });

  test('PUBLIC_URL defaults to the port; an explicit one loses its trailing slash', () => {
    expect(loadConfig({ PORT: '9090' }).publicUrl).toBe('http://localhost:9090');
    expect(loadConfig({ PUBLIC_URL: 'https://cpd.example.com/', PAYMENT_MODE: 'sandbox' }).publicUrl).toBe('https://cpd.example.com');
  });

  test('empty values count as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: '' })).toMatchObject({ port: 8080, databaseUrl: null });
  });

  test("ROUTER_UPSTREAM_CLIENT: fetch for every backend by default, cpd's own client for plain HTTP with http1, unless behind a proxy", () => {
    expect(loadConfig({}).router.ownHttpClient).toBe(false);
    expect(loadConfig({ ROUTER_UPSTREAM_CLIENT: 'http1' }).router.ownHttpClient).toBe(true);
    expect(loadConfig({ ROUTER_UPSTREAM_CLIENT: 'http1', http_proxy: 'http://proxy:3128' }).router.ownHttpClient).toBe(false);
    expect(() => loadConfig({ ROUTER_UPSTREAM_CLIENT: 'undici' })).toThrow(ConfigError);
  });

  test('MODEL_BACKENDS lists several upstreams per slug', () => {
    const c = loadConfig({ MODEL_BACKENDS: 'a=http://h1:1/v1, a=http://h2:2/v1,b=https://h3/v1/' });
    expect(c.modelBackends).toEqual({
      a: [
        { url: 'http://h1:1/v1', apiKey: null },
        { url: 'http://h2:2/v1', apiKey: null },
      ],
      b: [{ url: 'https://h3/v1', apiKey: null }],
    });
  });

  test('MODEL_BACKENDS marks an Anthropic Messages API backend by anthropic+ before its URL', () => {
    const c = loadConfig({ MODEL_BACKENDS: 'c=anthropic+https://api.anthropic.com#env:ANT_KEY,c=anthropic+http://h:1,d=http://h/v1', ANT_KEY: 'sk-ant' });
    expect(c.modelBackends).toEqual({
      c: [
        { url: 'https://api.anthropic.com', apiKey: 'sk-ant', format: 'anthropic' },
        { url: 'http://h:1', apiKey: null, format: 'anthropic' },
      ],
      d: [{ url: 'http://h/v1', apiKey: null }],
    });
    expect(() => loadConfig({ MODEL_BACKENDS: 'c=anthropic+ftp://h' })).toThrow('MODEL_BACKENDS');
  });

  test('MODEL_BACKENDS reads a backend key from the variable named by #env:', () => {
    const c = loadConfig({ MODEL_BACKENDS: 'a=https://api.example.com/v1#env:A_KEY,b=http://h/v1', A_KEY: 'sk-secret' });
    expect(c.modelBackends).toEqual({ a: [{ url: 'https://api.example.com/v1', apiKey: 'sk-secret' }], b: [{ url: 'http://h/v1', apiKey: null }] });
    expect(() => loadConfig({ MODEL_BACKENDS: 'a=http://h/v1#env:MISSING_KEY' })).toThrow('MISSING_KEY (named by #env:) is not set');
    expect(() => loadConfig({ MODEL_BACKENDS: 'a=http://h/v1#sk-inline' })).toThrow('must be #env:VARIABLE');
    try {
      loadConfig({ MODEL_BACKENDS: 'a=http://h/v1#sk-inline' });
    } catch (err) {
      expect((err as Error).message).not.toContain('sk-inline');
    }
  });

  test('RELEASE_REPOS overrides one component and keeps the others', () => {
    const c = loadConfig({ RELEASE_REPOS: 'engine=acme/eng' });
    expect(c.releaseRepos).toMatchObject({ engine: 'acme/eng', router: 'ariacompute/router' });
  });

  const bad: Array<[string, string]> = [
    ['SITE', 'mars'],
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '80.5'],
    ['PUBLIC_URL', 'not a url'],
    ['PUBLIC_URL', 'ftp://x'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_READ_URL', 'mysql://x'],
    // A replica only of an external PostgreSQL: without DATABASE_URL it is refused.
    ['DATABASE_READ_URL', 'postgres://replica/db'],
    ['STORAGE_URL', 'gopher://x'],
    ['SECRET_KEY', 'short'],
    ['SESSION_TTL', 'forever'],
    ['PRESIGN_TTL', '0s'],
    ['PAYMENT_PROVIDERS', 'card,cash'],
    ['PAYMENT_MODE', 'test'],
    ['TOPUP_MIN', '-1'],
    ['TOPUP_MAX', 'lots'],
    ['MODEL_BACKENDS', 'noequals'],
    ['MODEL_BACKENDS', 'a=file:///x'],
    ['RELEASE_SOURCE', 'ftp'],
    ['RELEASE_REPOS', 'engine=not a repo'],
    ['RELEASE_REPOS', 'kernel=a/b'],
    ['RELEASE_MIRROR_URL', 'nope'],
    ['GITHUB_API_URL', 'nope'],
    ['USD_PER_CNY', '0'],
    ['REGISTRATION', 'maybe'],
    ['TRUST_PROXY', 'yes'],
    ['LOG_LEVEL', 'loud'],
    ['GATEWAY_MAX_BODY', '4MB'],
    ['GATEWAY_MAX_BODY', '10'],
    ['ROUTER_PROBE_INTERVAL', 'often'],
    ['ROUTER_BREAKER', '50%'],
    ['ARIA_ROUTER', 'yes'],
    ['PAYMENT_PROVIDERS', 'app_wallet'],
    ['IMAGE_TOKENS', '0'],
    ['IMAGE_TOKENS', '1.5'],
    ['ADMISSION_DEFAULT_MAX_TOKENS', 'many'],
    ['WALLET_GRANT_TTL', 'never'],
    ['USAGE_SYNCHRONOUS_COMMIT', 'sometimes'],
  ];
  for (const [variable, value] of bad) {
    test(`${variable}=${JSON.stringify(value)} is refused naming ${variable}`, () => {
      let thrown: unknown;
      try {
        loadConfig({ [variable]: value });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).variable).toBe(variable);
      expect((thrown as ConfigError).message).toStartWith(`${variable}: `);
      expect((thrown as ConfigError).message).not.toContain('\n');
    });
  }

  test('DATABASE_READ_URL next to DATABASE_URL is kept; unset it is null', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://primary/db', DATABASE_READ_URL: 'postgresql://replica/db' }).databaseReadUrl).toBe('postgresql://replica/db');
    expect(loadConfig({ DATABASE_URL: 'postgres://primary/db' }).databaseReadUrl).toBeNull();
  });

  test('TOPUP_MAX below TOPUP_MIN is refused', () => {
    expect(() => loadConfig({ TOPUP_MIN: '50', TOPUP_MAX: '10' })).toThrow('TOPUP_MAX');
  });

  test('SECRET_KEY is generated once into DATA_DIR, only when first needed, and then reused', () => {
    const dir = join(dataDir, 'site');
    const first = loadConfig({ DATA_DIR: dir });
    expect(existsSync(join(dir, 'secret_key'))).toBe(false);
    const key = first.secretKey();
    expect(key.length).toBeGreaterThanOrEqual(32);
    expect(statSync(join(dir, 'secret_key')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, 'secret_key'), 'utf8').trim()).toBe(key);
    expect(loadConfig({ DATA_DIR: dir }).secretKey()).toBe(key);
  });

  test('an explicit SECRET_KEY wins and writes nothing', () => {
    const dir = join(dataDir, 'explicit');
    const c = loadConfig({ DATA_DIR: dir, SECRET_KEY: 'k'.repeat(40) });
    expect(c.secretKey()).toBe('k'.repeat(40));
    expect(existsSync(dir)).toBe(false);
  });
});

describe('safe defaults (one schema, combinations checked)', () => {
  const refusal = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (err) {
      return err as ConfigError;
    }
    return null;
  };

  test('PAYMENT_MODE unset means sandbox only while PUBLIC_URL is loopback', () => {
    for (const url of ['http://localhost:8080', 'http://127.0.0.1:9', 'http://127.8.9.10', 'http://[::1]:8080'])
      expect(loadConfig({ PUBLIC_URL: url }).paymentMode).toBe('sandbox');
    for (const url of ['https://cpd.example.com', 'http://10.0.0.5:8080', 'http://[::2]', 'http://localhost.example.com']) {
      const err = refusal({ PUBLIC_URL: url });
      expect(err?.variable).toBe('PAYMENT_MODE');
    }
    expect(loadConfig({ PUBLIC_URL: 'https://cpd.example.com', PAYMENT_MODE: 'sandbox' }).paymentMode).toBe('sandbox');
  });

  test('the deploy/ templates are production templates: live payments, a closed agent API, placeholders refused', () => {
    const readEnvFile = (name: string) =>
      Object.fromEntries(
        readFileSync(join(import.meta.dir, '../../deploy', name), 'utf8')
          .split('\n')
          .filter((line) => /^[A-Z_]+=/.test(line))
          .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
      );
    for (const file of ['intl.env', 'cn.env']) {
      const env = readEnvFile(file);
      expect(env).toMatchObject({ PAYMENT_MODE: 'live', AGENT_CLOUD_API_KEY: 'CHANGE-ME' });
      expect(env.PUBLIC_URL).toStartWith('https://');
      expect(refusal(env)?.message).toContain('still holds the template placeholder CHANGE-ME');
    }
    const filled = Object.fromEntries(Object.entries(readEnvFile('intl.env')).map(([k, v]) => [k, v === 'CHANGE-ME' ? `filled-${k.toLowerCase()}-0123456789abcdef` : v]));
    const config = loadConfig({ ...filled, DATA_DIR: dataDir });
    expect(config).toMatchObject({ paymentMode: 'live', agentCloudApiKey: 'filled-agent_cloud_api_key-0123456789abcdef', publicUrl: 'https://intl.example.com' });
  });

  test('a provider of the other site stops start-up naming PAYMENT_PROVIDERS', () => {
    expect(refusal({ SITE: 'intl', PAYMENT_PROVIDERS: 'card,app_wallet' })?.message).toContain('app_wallet is a provider of the cn site');
    expect(refusal({ SITE: 'cn', PAYMENT_PROVIDERS: 'card' })?.variable).toBe('PAYMENT_PROVIDERS');
    expect(loadConfig({ SITE: 'cn', PAYMENT_PROVIDERS: 'app_wallet' }).paymentProviders).toEqual(['app_wallet']);
  });

  test('module slices are typed at load: router timings, gateway body limit, runtime paths', () => {
    const c = loadConfig({ ROUTER_PROBE_INTERVAL: '2s', GATEWAY_MAX_BODY: '2048', ARIA_FFI_LIB: '/x/lib.so', ARIA_ROUTER: 'supervise', SOME_TOKEN: 's3cret' });
    expect(c.router.probeIntervalMs).toBe(2000);
    expect(c.router.breaker).toEqual({ failureRate: 0.5, minimumAttempts: 20, windowMs: 60_000, coolDownMs: 30_000 });
    expect(loadConfig({ ROUTER_BREAKER: 'off' }).router.breaker).toBeNull();
    expect(c.gateway.maxBodyBytes).toBe(2048);
    expect(c.runtime).toMatchObject({ engineLib: '/x/lib.so', superviseRouter: true, engineBin: null });
    expect(c.runtime.childEnv.SOME_TOKEN).toBeUndefined();
    expect(c).not.toHaveProperty('env');
  });

  test('only config.ts reads the environment, and configuration imports no HTTP code', async () => {
    const { Glob } = await import('bun');
    const root = join(import.meta.dir, '../../src');
    for await (const file of new Glob('**/*.ts').scan(root)) {
      const text = readFileSync(join(root, file), 'utf8');
      // main.ts peeks at DATABASE_URL to warm PGlite up; cli/env-file.ts loads --env-file into the environment before configuration reads it.
      if (!['config.ts', 'main.ts', 'cli/env-file.ts'].includes(file)) expect({ file, reads: /process\.env\b/.test(text) }).toEqual({ file, reads: false });
    }
    for (const file of ['config.ts', 'config-parse.ts', 'platform/limits.ts'])
      expect(readFileSync(join(root, file), 'utf8')).not.toMatch(/from '[^']*\/http\//);
  });
});

describe('parseDuration', () => {
  test('accepts ms, s, m, h, d and bare seconds', () => {
    expect(parseDuration('X', '1500ms')).toBe(1500);
    expect(parseDuration('X', '90')).toBe(90_000);
    expect(parseDuration('X', '2m')).toBe(120_000);
    expect(parseDuration('X', '12h')).toBe(43_200_000);
    expect(parseDuration('X', '1d')).toBe(86_400_000);
  });

  test('refuses anything else', () => {
    for (const raw of ['', 'h', '-5s', '5 weeks', '1e3s']) expect(() => parseDuration('X', raw)).toThrow(ConfigError);
  });
});

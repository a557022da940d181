/**
 * The router's slice of the configuration, parsed in the config layer below the modules:
 * loadConfig (config.ts) calls routerSettings with its reader once at start-up; the router
 * (modules/router) gets `config.router`. A bad value throws ConfigError,
 * which stops `cpd serve` with one line naming the variable.
 *
 * ROUTES syntax: `name=strategy:model|model|…`, entries separated by `;`.
 *   ROUTES='auto=fallback:llama-8b|qwen-7b;cheap=cheapest:llama-8b|qwen-7b;spread=least-loaded:a|b'
 *   fallback      the models in the order given
 *   cheapest      the lowest estimated cost for this request first (unpriced models skipped)
 *   least-loaded  the model whose healthiest backend has the fewest requests in flight first
 * Whatever the order, the router fails over to the next candidate before the first byte.
 *
 * ROUTER_BREAKER syntax: `rate%/attempts/window[/cool-down]`, or `off`.
 *   ROUTER_BREAKER=50%/20/60s/30s   (the default) a backend's breaker opens when at least half of at
 *                                   least 20 attempts in the last 60 s failed; a probe may go 30 s later
 */
import { ConfigError, oneOf, parseDuration } from './config-parse';
import { IDLE_TIMEOUT_SECONDS, MAX_REQUEST_SILENCE_SECONDS } from './platform/http/listen';

/**
 * Seconds a gateway request may stay silent past its ROUTER_REQUEST_TIMEOUT: the router answers
 * (a 503 it can read) before the HTTP server would close the connection with a reset.
 */
const REQUEST_SILENCE_MARGIN_SECONDS = 5;
/** How long a gateway request may stay silent: its ROUTER_REQUEST_TIMEOUT and the margin (platform/http/listen's holdOpen). */
export const requestSilenceSeconds = (settings: Pick<RouterSettings, 'requestTimeoutMs'>) =>
  Math.ceil(settings.requestTimeoutMs / 1000) + REQUEST_SILENCE_MARGIN_SECONDS;
/** ROUTER_REQUEST_TIMEOUT's default: the server's own idle timeout, less the margin. */
const DEFAULT_REQUEST_TIMEOUT_MS = (IDLE_TIMEOUT_SECONDS - REQUEST_SILENCE_MARGIN_SECONDS) * 1000;
/** The longest ROUTER_REQUEST_TIMEOUT: the longest silence Bun allows a request, less the margin. */
const MAX_REQUEST_TIMEOUT_MS = (MAX_REQUEST_SILENCE_SECONDS - REQUEST_SILENCE_MARGIN_SECONDS) * 1000;

export const STRATEGIES = ['fallback', 'cheapest', 'least-loaded'] as const;
export type Strategy = (typeof STRATEGIES)[number];

export interface RouteDef {
  name: string;
  strategy: Strategy;
  models: string[];
}

export interface BreakerSettings {
  /** 0 < rate ≤ 1: the share of failed attempts that opens the breaker. */
  failureRate: number;
  /** The fewest attempts in the window a verdict is made on. */
  minimumAttempts: number;
  windowMs: number;
  /** How long an opened breaker keeps its backend out before a probe. */
  coolDownMs: number;
}

export interface RouterSettings {
  routes: Map<string, RouteDef>;
  probeIntervalMs: number;
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  /** How long a request may wait for its first byte in all, admission and every failover included. */
  requestTimeoutMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** How long a request at the edge of its user's balance waits for that user's in-flight requests to settle. */
  admissionWaitMs: number;
  /** Per-backend circuit breaker (router.breaker.ts); null: off. */
  breaker: BreakerSettings | null;
  /**
   * Plain-HTTP backends go over cpd's own HTTP/1.1 client: ROUTER_UPSTREAM_CLIENT=http1 and no
   * `http_proxy` (fetch honours it and `no_proxy`). Otherwise every backend is called through Bun's
   * fetch (docs/decisions/0021-upstream-http-client.md).
   */
  ownHttpClient: boolean;
}

const SLUG = /^[\w.:/-]+$/;

export function parseRoutes(raw: string | null): Map<string, RouteDef> {
  const routes = new Map<string, RouteDef>();
  for (const entry of (raw ?? '').split(';').map((s) => s.trim()).filter(Boolean)) {
    const m = /^([^=\s]+)\s*=\s*([\w-]+)\s*:\s*(.+)$/.exec(entry);
    if (!m) throw new ConfigError('ROUTES', `"${entry}" is not name=strategy:model|model (example: auto=fallback:a|b)`);
    const [, name, strategy, list] = m as unknown as [string, string, string, string];
    if (!(STRATEGIES as readonly string[]).includes(strategy))
      throw new ConfigError('ROUTES', `"${strategy}" is not one of ${STRATEGIES.join(', ')}`);
    const models = list.split('|').map((s) => s.trim());
    if (models.some((s) => !SLUG.test(s))) throw new ConfigError('ROUTES', `"${list}" is not a |-separated list of model slugs`);
    if (routes.has(name)) throw new ConfigError('ROUTES', `route "${name}" is defined twice`);
    routes.set(name, { name, strategy: strategy as Strategy, models });
  }
  return routes;
}

export const DEFAULT_BREAKER = '50%/20/60s/30s';

export function parseBreaker(raw: string): BreakerSettings | null {
  const variable = 'ROUTER_BREAKER';
  if (raw.trim() === 'off') return null;
  const m = /^\s*(\d+(?:\.\d+)?)%\s*\/\s*(\d+)\s*\/\s*([^/\s]+)\s*(?:\/\s*([^/\s]+)\s*)?$/.exec(raw);
  if (!m) throw new ConfigError(variable, `"${raw}" is not rate%/attempts/window[/cool-down] or off (example: ${DEFAULT_BREAKER})`);
  const [, rate, attempts, window, coolDown] = m as unknown as [string, string, string, string, string | undefined];
  const failureRate = Number(rate) / 100;
  if (!(failureRate > 0 && failureRate <= 1)) throw new ConfigError(variable, `the rate must be above 0% and at most 100%, not ${rate}%`);
  const minimumAttempts = Number(attempts);
  if (minimumAttempts < 1) throw new ConfigError(variable, 'at least 1 attempt');
  return { failureRate, minimumAttempts, windowMs: parseDuration(variable, window), coolDownMs: parseDuration(variable, coolDown ?? '30s') };
}

export function routerSettings(get: (name: string) => string | undefined, rawRoutes: string | null, modelBackends: Record<string, unknown[]>): RouterSettings {
  const env = (name: string, fallback: string) => parseDuration(name, get(name) ?? fallback);
  const routes = parseRoutes(rawRoutes);
  for (const name of routes.keys())
    if (modelBackends[name]) throw new ConfigError('ROUTES', `route "${name}" has the name of a model in MODEL_BACKENDS`);
  const requestTimeoutMs = env('ROUTER_REQUEST_TIMEOUT', `${DEFAULT_REQUEST_TIMEOUT_MS / 1000}s`);
  if (requestTimeoutMs > MAX_REQUEST_TIMEOUT_MS)
    throw new ConfigError(
      'ROUTER_REQUEST_TIMEOUT',
      `at most ${MAX_REQUEST_TIMEOUT_MS / 1000}s: the HTTP server closes a request that has heard nothing for ${MAX_REQUEST_SILENCE_SECONDS}s`,
    );
  return {
    routes,
    probeIntervalMs: env('ROUTER_PROBE_INTERVAL', '10s'),
    connectTimeoutMs: env('ROUTER_CONNECT_TIMEOUT', '5s'),
    firstByteTimeoutMs: env('ROUTER_FIRST_BYTE_TIMEOUT', '60s'),
    requestTimeoutMs,
    backoffBaseMs: env('ROUTER_BACKOFF', '1s'),
    backoffMaxMs: env('ROUTER_BACKOFF_MAX', '30s'),
    admissionWaitMs: env('ROUTER_ADMISSION_WAIT', '10s'),
    breaker: parseBreaker(get('ROUTER_BREAKER') ?? DEFAULT_BREAKER),
    ownHttpClient:
      oneOf('ROUTER_UPSTREAM_CLIENT', get('ROUTER_UPSTREAM_CLIENT') ?? 'fetch', ['fetch', 'http1'] as const) === 'http1' &&
      !(get('http_proxy') || get('HTTP_PROXY')),
  };
}

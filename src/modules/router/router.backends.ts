/**
 * The backend set: upstream base URLs per model slug, each speaking one format (OpenAI chat
 * completions, or Anthropic's Messages API), from MODEL_BACKENDS (`env`), the
 * admin-managed set (`admin`, replaced as a whole by replaceAdmin) and registerBackend (`engine`:
 * the runtime supervisor's engines). Health is passive (a failed request takes the backend out for
 * a backoff window that doubles per consecutive failure) and active (a periodic GET {url}/models;
 * success puts it back at once, failure takes it out). Only the backend's own failures count: no
 * answer, a timeout, a 5xx, 429, an answer that is not one; what the caller's request caused does not.
 * Apart from that short backoff, a circuit breaker per backend (router.breaker.ts) takes out a
 * backend that fails too large a share of its requests, while its model has another to go to.
 *
 * Choice among a model's healthy backends is weighted least-loaded: fewest requests in flight per
 * unit of weight first; among equally loaded ones (an idle model: all of them) a smooth weighted
 * round robin (as nginx's upstream module does) spreads requests exactly in proportion to weight.
 */
import type { Logger } from '../../platform/logger';
import type { RouterSettings } from '../../config-router';
import { type Breaker, type BreakerChange, type BreakerView, createBreaker } from './router.breaker';
import { authorizationOf, type BackendFormat, isDirect, type Upstream } from './router.upstream';

export type BackendSource = 'env' | 'admin' | 'engine';

/** The Messages API version sent to anthropic-format backends when the client names none. */
export const ANTHROPIC_VERSION = '2023-06-01';

export interface BackendOptions {
  source: BackendSource;
  /** Sent upstream as `Authorization: Bearer`; never shown, logged or measured. */
  apiKey?: string | null;
  /** 1..100: the backend's share of its model's traffic relative to the others. */
  weight?: number;
  enabled?: boolean;
  /** The protocol it speaks (default openai). */
  format?: BackendFormat;
}

export interface Backend extends Upstream {
  slug: string;
  format: BackendFormat;
  source: BackendSource;
  weight: number;
  enabled: boolean;
  /** Smooth weighted round robin's running credit. */
  credit: number;
  inflight: number;
  failures: number;
  /** Epoch ms until which the backend is out of rotation (0: healthy). */
  downUntil: number;
  lastError: string | null;
  lastProbeAt: number | null;
  /** null: ROUTER_BREAKER=off. */
  breaker: Breaker | null;
}

export interface BackendView {
  model: string;
  url: string;
  source: BackendSource;
  format: BackendFormat;
  weight: number;
  enabled: boolean;
  /** Whether an API key is set (the key itself is write-only). */
  has_api_key: boolean;
  healthy: boolean;
  inflight: number;
  consecutive_failures: number;
  down_until: string | null;
  last_error: string | null;
  last_probe_at: string | null;
  /** The circuit breaker (null when ROUTER_BREAKER=off). */
  breaker: BreakerView | null;
}

export interface BackendSetOptions {
  /** The passive backoff's clock (epoch ms). */
  now?: () => number;
  /** The breakers' clock (epoch ms): the app's clock, which tests move by hand. */
  breakerNow?: () => number;
  /** Told every breaker change (the router records it). */
  onBreakerChange?: (backend: { model: string; url: string }, change: BreakerChange) => void;
}

export function createBackendSet(settings: RouterSettings, log: Logger, options: BackendSetOptions = {}) {
  const now = options.now ?? Date.now;
  const bySlug = new Map<string, Backend[]>();

  const healthy = (b: Backend) => b.downUntil <= now();
  /** A model's enabled backends; of one format when `format` is given. */
  const enabledOf = (slug: string, format?: BackendFormat) => (bySlug.get(slug) ?? []).filter((b) => b.enabled && (format === undefined || b.format === format));
  const all = () => [...bySlug.values()].flat();

  function add(backend: Backend) {
    bySlug.set(backend.slug, [...(bySlug.get(backend.slug) ?? []), backend]);
  }

  function remove(backend: Backend) {
    const rest = (bySlug.get(backend.slug) ?? []).filter((b) => b !== backend);
    if (rest.length) bySlug.set(backend.slug, rest);
    else bySlug.delete(backend.slug);
  }

  function register(slug: string, url: string, opts: BackendOptions = { source: 'engine' }): () => void {
    const backend: Backend = {
      slug,
      url: url.replace(/\/+$/, ''),
      direct: isDirect(url, settings.ownHttpClient),
      source: opts.source,
      format: opts.format ?? 'openai',
      apiKey: opts.apiKey ?? null,
      weight: opts.weight ?? 1,
      enabled: opts.enabled ?? true,
      credit: 0,
      inflight: 0,
      failures: 0,
      downUntil: 0,
      lastError: null,
      lastProbeAt: null,
      breaker: null,
    };
    if (settings.breaker) backend.breaker = createBreaker(settings.breaker, options.breakerNow ?? now, (change) => options.onBreakerChange?.({ model: slug, url: backend.url }, change));
    add(backend);
    return () => remove(backend);
  }

  /**
   * Replaces every `admin` backend with `entries`. A backend that stays (same model and URL) keeps
   * its health and in-flight count; requests already running on a removed one finish there.
   */
  function replaceAdmin(entries: Array<{ model: string; url: string; apiKey: string | null; weight: number; enabled: boolean; format?: BackendFormat }>) {
    const current = new Map(all().filter((b) => b.source === 'admin').map((b) => [`${b.slug} ${b.url}`, b]));
    for (const e of entries) {
      const kept = current.get(`${e.model} ${e.url}`);
      if (kept) {
        current.delete(`${e.model} ${e.url}`);
        // New credentials deserve a fresh chance: failures under the old key say nothing of the new one.
        if (kept.apiKey !== e.apiKey || kept.format !== (e.format ?? 'openai')) {
          markOk(kept);
          kept.breaker?.reset();
        }
        Object.assign(kept, { apiKey: e.apiKey, weight: e.weight, enabled: e.enabled, format: e.format ?? 'openai' });
      } else register(e.model, e.url, { source: 'admin', apiKey: e.apiKey, weight: e.weight, enabled: e.enabled, format: e.format });
    }
    for (const gone of current.values()) remove(gone);
  }

  /** Smooth weighted round robin among equally loaded backends: exact shares, no bursts. */
  function pickWeighted(tied: Backend[]): Backend {
    let total = 0;
    let best = tied[0]!;
    for (const b of tied) {
      b.credit += b.weight;
      total += b.weight;
      if (b.credit > best.credit) best = b;
    }
    best.credit -= total;
    return best;
  }

  /** Whether the backend's breaker lets a request through now (closed, or half-open with no probe out). */
  const admitted = (b: Backend) => b.breaker?.allows() ?? true;

  /**
   * A model's enabled backends of `format` (a request is sent in one protocol) in the order to
   * try, those their breaker keeps out left aside
   * (lastResort): a half-open one first (the request is its probe), then the others in order.
   */
  function candidates(slug: string, format: BackendFormat = 'openai'): Backend[] {
    const enabled = enabledOf(slug, format).filter(admitted);
    const probing = enabled.filter((b) => b.breaker?.current() === 'half-open');
    const rest = enabled.filter((b) => !probing.includes(b));
    return [...probing, ...ordered(rest)];
  }

  /**
   * A model's backends its breakers keep out, soonest probe first: tried only when nothing in
   * rotation answered, since an answer from a failing backend beats none.
   */
  function lastResort(slug: string, format: BackendFormat = 'openai'): Backend[] {
    const probeAt = (b: Backend) => b.breaker?.probeAt() ?? 0;
    return enabledOf(slug, format)
      .filter((b) => !admitted(b))
      .sort((a, b) => probeAt(a) - probeAt(b));
  }

  /** Healthy ones by fewest in flight per unit of weight (ties shared by weight), then those in backoff (soonest back first). */
  function ordered(enabled: Backend[]): Backend[] {
    if (enabled.length <= 1) return enabled;
    const load = (b: Backend) => b.inflight / b.weight;
    const up = enabled.filter(healthy).sort((a, b) => load(a) - load(b));
    const down = enabled.filter((b) => !healthy(b)).sort((a, b) => a.downUntil - b.downUntil);
    if (up.length > 1) {
      const tied = up.filter((b) => load(b) === load(up[0]!));
      if (tied.length > 1) {
        const first = pickWeighted(tied);
        up.splice(up.indexOf(first), 1);
        up.unshift(first);
      }
    }
    return [...up, ...down];
  }

  function markOk(b: Backend) {
    b.failures = 0;
    b.downUntil = 0;
  }

  /** The backend answered the request of `lease` (whatever the caller's request made it answer). */
  function answered(b: Backend, lease: unknown) {
    markOk(b);
    b.breaker?.succeeded(lease);
  }

  /** The backend failed the request of `lease`: backoff, and a failure in its breaker's window. */
  function failedRequest(b: Backend, error: string, lease: unknown) {
    markFailed(b, error);
    b.breaker?.failed(lease);
  }

  /** A stream that had started broke: a failure, for a request already counted as answered. */
  function brokeMidStream(b: Backend, error: string) {
    markFailed(b, error);
    b.breaker?.brokeAfterSuccess();
  }

  function markFailed(b: Backend, error: string) {
    b.failures++;
    b.lastError = error;
    const backoff = Math.min(settings.backoffMaxMs, settings.backoffBaseMs * 2 ** Math.min(b.failures - 1, 20));
    b.downUntil = now() + backoff;
    log.warn({ msg: 'router backend failed', model: b.slug, backend: b.url, error, backoff_ms: backoff });
  }

  async function probe(b: Backend) {
    b.lastProbeAt = now();
    try {
      // Anthropic's model list is under its base URL's /v1, and wants the API version named.
      const [path, headers] = b.format === 'anthropic' ? ['/v1/models', { 'anthropic-version': ANTHROPIC_VERSION }] : ['/models', {}];
      const res = await fetch(`${b.url}${path}`, { headers: { ...headers, ...authorizationOf(b) }, signal: AbortSignal.timeout(settings.connectTimeoutMs) });
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`probe answered ${res.status}`);
      markOk(b);
    } catch (err) {
      markFailed(b, `probe: ${(err as Error).message}`);
    }
  }

  /** Probes every backend now and then every probeIntervalMs; returns the stop function. */
  function startProbing(): () => void {
    let running = false;
    const round = async () => {
      if (running) return;
      running = true;
      await Promise.all(all().filter((b) => b.enabled).map(probe));
      running = false;
    };
    const timer = setInterval(() => void round(), settings.probeIntervalMs);
    timer.unref?.();
    return () => clearInterval(timer);
  }

  function list(): BackendView[] {
    return all().map((b) => ({
      model: b.slug,
      url: b.url,
      source: b.source,
      format: b.format,
      weight: b.weight,
      enabled: b.enabled,
      has_api_key: b.apiKey !== null,
      healthy: healthy(b),
      inflight: b.inflight,
      consecutive_failures: b.failures,
      down_until: healthy(b) ? null : new Date(b.downUntil).toISOString(),
      last_error: b.lastError,
      last_probe_at: b.lastProbeAt === null ? null : new Date(b.lastProbeAt).toISOString(),
      breaker: b.breaker?.view() ?? null,
    }));
  }

  return {
    register,
    replaceAdmin,
    candidates,
    lastResort,
    answered,
    failedRequest,
    brokeMidStream,
    markFailed,
    probeAll: () => Promise.all(all().filter((b) => b.enabled).map(probe)),
    startProbing,
    list,
    /** Model slugs with at least one enabled backend (of `format` when given). */
    models: (format?: BackendFormat) => [...bySlug.keys()].filter((slug) => enabledOf(slug, format).length > 0),
    has: (slug: string, format?: BackendFormat) => enabledOf(slug, format).length > 0,
    /** Whether the backend's breaker lets a request through now. */
    admitted,
    /** Fewest requests in flight among the model's healthy backends of `format` in rotation (Infinity when none is). */
    load: (slug: string, format?: BackendFormat) => Math.min(...enabledOf(slug, format).filter((b) => healthy(b) && admitted(b)).map((b) => b.inflight), Number.POSITIVE_INFINITY),
  };
}

export type BackendSet = ReturnType<typeof createBackendSet>;

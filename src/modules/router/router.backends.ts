/**
 * The backend set: upstream OpenAI base URLs per model slug, from MODEL_BACKENDS and from
 * registerBackend (the runtime supervisor's engines). Health is passive (a failed request takes the
 * backend out for a backoff window that doubles per consecutive failure) and active (a periodic
 * GET {url}/models; success puts it back at once, failure takes it out).
 */
import type { Logger } from '../../platform/logger';
import type { RouterSettings } from './router.config';

export interface Backend {
  slug: string;
  url: string;
  source: string;
  inflight: number;
  failures: number;
  /** Epoch ms until which the backend is out of rotation (0: healthy). */
  downUntil: number;
  lastError: string | null;
  lastProbeAt: number | null;
}

export interface BackendView {
  model: string;
  url: string;
  source: string;
  healthy: boolean;
  inflight: number;
  consecutive_failures: number;
  down_until: string | null;
  last_error: string | null;
  last_probe_at: string | null;
}

export function createBackendSet(settings: RouterSettings, log: Logger, now: () => number = Date.now) {
  const bySlug = new Map<string, Backend[]>();

  const healthy = (b: Backend) => b.downUntil <= now();

  function register(slug: string, url: string, meta: { source: string } = { source: 'runtime' }): () => void {
    const backend: Backend = { slug, url: url.replace(/\/+$/, ''), source: meta.source, inflight: 0, failures: 0, downUntil: 0, lastError: null, lastProbeAt: null };
    bySlug.set(slug, [...(bySlug.get(slug) ?? []), backend]);
    return () => {
      const rest = (bySlug.get(slug) ?? []).filter((b) => b !== backend);
      if (rest.length) bySlug.set(slug, rest);
      else bySlug.delete(slug);
    };
  }

  /** A model's backends in the order to try: healthy ones by fewest in flight, then those in backoff (soonest back first). */
  function candidates(slug: string): Backend[] {
    const all = bySlug.get(slug) ?? [];
    if (all.length === 1) return all;
    const up = all.filter(healthy).sort((a, b) => a.inflight - b.inflight);
    const down = all.filter((b) => !healthy(b)).sort((a, b) => a.downUntil - b.downUntil);
    return [...up, ...down];
  }

  function markOk(b: Backend) {
    b.failures = 0;
    b.downUntil = 0;
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
      const res = await fetch(`${b.url}/models`, { signal: AbortSignal.timeout(settings.connectTimeoutMs) });
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
      await Promise.all([...bySlug.values()].flat().map(probe));
      running = false;
    };
    const timer = setInterval(() => void round(), settings.probeIntervalMs);
    timer.unref?.();
    return () => clearInterval(timer);
  }

  function list(): BackendView[] {
    return [...bySlug.values()].flat().map((b) => ({
      model: b.slug,
      url: b.url,
      source: b.source,
      healthy: healthy(b),
      inflight: b.inflight,
      consecutive_failures: b.failures,
      down_until: healthy(b) ? null : new Date(b.downUntil).toISOString(),
      last_error: b.lastError,
      last_probe_at: b.lastProbeAt === null ? null : new Date(b.lastProbeAt).toISOString(),
    }));
  }

  return {
    register,
    candidates,
    markOk,
    markFailed,
    probeAll: () => Promise.all([...bySlug.values()].flat().map(probe)),
    startProbing,
    list,
    /** Model slugs with at least one backend. */
    models: () => [...bySlug.keys()],
    has: (slug: string) => bySlug.has(slug),
    /** Fewest requests in flight among the model's healthy backends (Infinity when none is healthy). */
    load: (slug: string) => Math.min(...(bySlug.get(slug) ?? []).filter(healthy).map((b) => b.inflight), Number.POSITIVE_INFINITY),
  };
}

export type BackendSet = ReturnType<typeof createBackendSet>;

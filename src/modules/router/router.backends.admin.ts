/**
 * The admin-managed backends: stored in router_backends, replaced as a whole by
 * PUT /api/admin/router/backends, and followed by every process through NOTIFY (reloaded on every
 * reconnect of the LISTEN connection too), so each replica routes with a new set within moments.
 *
 * API keys are write-only: sealed at rest with a key derived from SECRET_KEY (platform/crypto
 * secretBox) and opened only into the in-memory backend that sends them upstream. In a PUT, an
 * entry without `api_key` keeps the key already stored for its model and URL; `null` removes it.
 */
import { asc, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { secretBox } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { followChanges, serialReload } from '../../platform/db';
import { newId } from '../../platform/ids';
import type { BackendSet } from './router.backends';
import type { BackendFormat } from './router.upstream';
import { routerBackends } from './router.tables';

const CHANNEL = 'cpd_router_backends';
/** Serialises concurrent replacements (each reads the stored keys, then rewrites the set). */
const REPLACE_LOCK = 7_353_101;
const SLUG = /^[\w.:/-]+$/;
/** Printable ASCII without spaces: what fits in an Authorization header unchanged. */
const API_KEY = /^[\x21-\x7e]+$/;

export interface BackendInput {
  model: string;
  url: string;
  api_key?: string | null;
  weight?: number;
  enabled?: boolean;
  format?: BackendFormat;
}

/** The URL as stored and compared: parsed, http(s) only, without trailing slashes. */
function backendUrl(i: number, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new AppError('invalid', `backends[${i}].url is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new AppError('invalid', `backends[${i}].url must be an http(s) URL`);
  if (u.username || u.password) throw new AppError('invalid', `backends[${i}].url must not carry credentials (use api_key)`);
  return raw.replace(/\/+$/, '');
}

export function createAdminBackends(ctx: AppContext, backends: BackendSet, routeNames: ReadonlySet<string>) {
  const { db } = ctx.database;
  let box: ReturnType<typeof secretBox> | null = null;
  const keys = () => (box ??= secretBox(ctx.config.secretKey(), 'router backend api keys'));

  const reload = serialReload(async () => {
    const rows = await db.select().from(routerBackends).orderBy(asc(routerBackends.position));
    backends.replaceAdmin(
      rows.map((r) => {
        let apiKey: string | null = null;
        let enabled = r.enabled;
        if (r.apiKeySealed) {
          try {
            apiKey = keys().open(r.apiKeySealed);
          } catch {
            // Sealed under another SECRET_KEY: sending no key would only earn 401s, so it is left out.
            ctx.log.error({ model: r.model, backend: r.url }, 'backend API key cannot be decrypted with this SECRET_KEY; backend disabled until its key is set again');
            enabled = false;
          }
        }
        return { model: r.model, url: r.url, apiKey, weight: r.weight, enabled, format: r.format };
      }),
    );
  });

  function validate(input: BackendInput[]) {
    const seen = new Set<string>();
    return input.map((b, i) => {
      if (!SLUG.test(b.model)) throw new AppError('invalid', `backends[${i}].model is not a model slug`);
      if (routeNames.has(b.model)) throw new AppError('invalid', `backends[${i}].model "${b.model}" is the name of a route`);
      const url = backendUrl(i, b.url);
      const weight = b.weight ?? 1;
      if (!Number.isInteger(weight) || weight < 1 || weight > 100) throw new AppError('invalid', `backends[${i}].weight must be an integer from 1 to 100`);
      if (typeof b.api_key === 'string' && !API_KEY.test(b.api_key)) throw new AppError('invalid', `backends[${i}].api_key must be printable ASCII without spaces`);
      const id = `${b.model} ${url}`;
      if (seen.has(id)) throw new AppError('invalid', `backends[${i}] repeats model "${b.model}" with URL ${url}`);
      seen.add(id);
      return { model: b.model, url, apiKey: b.api_key, weight, enabled: b.enabled ?? true, format: b.format ?? 'openai' };
    });
  }

  return {
    /** Loads the set and follows changes from other processes; app start-up awaits it once. */
    load: () => followChanges(ctx, CHANNEL, reload, 'router backends'),

    /** Replaces the admin-managed set in one transaction and tells every process. Bad input changes nothing. */
    async replace(input: BackendInput[]) {
      const entries = validate(input);
      const now = ctx.clock.now();
      await db.transaction(async (tx) => {
        await tx.execute(sql`select pg_advisory_xact_lock(${REPLACE_LOCK})`);
        const stored = new Map((await tx.select().from(routerBackends)).map((r) => [`${r.model} ${r.url}`, r.apiKeySealed]));
        await tx.delete(routerBackends);
        if (entries.length)
          await tx.insert(routerBackends).values(
            entries.map((e, position) => ({
              id: newId('rbe'),
              model: e.model,
              url: e.url,
              apiKeySealed: e.apiKey === undefined ? (stored.get(`${e.model} ${e.url}`) ?? null) : e.apiKey === null ? null : keys().seal(e.apiKey),
              weight: e.weight,
              enabled: e.enabled,
              format: e.format,
              position,
              updatedAt: now,
            })),
          );
        await ctx.database.notify(CHANNEL, 'replaced', tx);
      });
      await reload();
    },
  };
}

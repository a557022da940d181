/**
 * The pricing catalog. Prices live in micro-units (bigint) of the site currency; the whole catalog
 * is cached in memory because the gateway prices every request from it (priceOf is synchronous).
 * A change in any process sends NOTIFY cpd_pricing, and every process reloads its cache.
 */
import { asc } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { followChanges, serialReload } from '../../platform/db';
import { exactMajorToMicros, toMajor } from '../../platform/money';
import { newId } from '../../platform/ids';
import type { GpuPriceInput, ModelPriceInput, PriceUnit } from './pricing.schemas';
import { gpuPrices, modelPrices } from './pricing.tables';

const CHANNEL = 'cpd_pricing';

export interface ModelPrice {
  id: string;
  slug: string;
  unit: PriceUnit;
  priceMicros: bigint;
}

export interface GpuPrice {
  id: string;
  name: string;
  hourlyPriceMicros: bigint;
}


function duplicate(values: string[]): string | null {
  const seen = new Set<string>();
  for (const v of values) {
    if (seen.has(v)) return v;
    seen.add(v);
  }
  return null;
}

/** The price in micro-units; more than 6 decimals is refused, never rounded (0.0000004 must not become free). */
function priceMicros(what: string, value: number): bigint {
  if (!Number.isFinite(value) || value < 0) throw new AppError('invalid', `${what}: price must be a finite non-negative number`);
  const micros = exactMajorToMicros(value);
  if (micros === null) throw new AppError('invalid', `${what}: price must have at most 6 decimals and be below 1000000000000`);
  return micros;
}

export function createPricingService(ctx: AppContext) {
  const { db } = ctx.database;
  const currency = ctx.config.currency;
  let models: ModelPrice[] = [];
  let gpus: GpuPrice[] = [];
  let bySlug = new Map<string, ModelPrice>();
  let lastChange: Date | null = null;

  const reload = serialReload(async () => {
    // Sequential on purpose: parallel queries would open another pool connection at start-up (~7 ms).
    const m = await db.select().from(modelPrices).orderBy(asc(modelPrices.position));
    const g = await db.select().from(gpuPrices).orderBy(asc(gpuPrices.position));
    models = m.map((r) => ({ id: r.id, slug: r.slug, unit: r.unit as PriceUnit, priceMicros: r.priceMicros }));
    gpus = g.map((r) => ({ id: r.id, name: r.name, hourlyPriceMicros: r.hourlyPriceMicros }));
    bySlug = new Map(models.map((p) => [p.slug, p]));
    const times = [...m, ...g].map((r) => r.updatedAt.getTime());
    lastChange = times.length ? new Date(Math.max(...times)) : null;
  });

  const modelView = (p: ModelPrice) => ({ id: p.id, slug: p.slug, unit: p.unit, price: toMajor(p.priceMicros), currency });
  const gpuView = (p: GpuPrice) => ({ id: p.id, name: p.name, hourly_price: toMajor(p.hourlyPriceMicros), currency });

  return {
    /** Loads the cache and subscribes to changes from other processes; app.ts awaits it once. */
    load: () => followChanges(ctx, CHANNEL, reload, 'pricing'),

    /** The price the gateway charges for a model slug, from the in-memory cache; null when unpriced. */
    priceOf(slug: string): { unit: PriceUnit; priceMicros: bigint } | null {
      const p = bySlug.get(slug);
      return p ? { unit: p.unit, priceMicros: p.priceMicros } : null;
    },

    /** The public catalog; `limit` caps each list (models and GPUs) separately. */
    catalog(limit?: number) {
      const n = limit ?? Number.POSITIVE_INFINITY;
      return { models: models.slice(0, n).map(modelView), gpus: gpus.slice(0, n).map(gpuView) };
    },

    /** Replaces the model price list in one transaction and tells every process. */
    async setModelPrices(rows: ModelPriceInput[]) {
      const micros = rows.map((r) => priceMicros(r.slug, r.price));
      const dup = duplicate(rows.map((r) => r.slug));
      if (dup) throw new AppError('invalid', `duplicate slug "${dup}"`);
      const now = ctx.clock.now();
      await db.transaction(async (tx) => {
        await tx.delete(modelPrices);
        if (rows.length)
          await tx.insert(modelPrices).values(
            rows.map((r, position) => ({ id: newId('mpr'), slug: r.slug, unit: r.unit, priceMicros: micros[position]!, position, updatedAt: now })),
          );
        await ctx.database.notify(CHANNEL, 'models', tx);
      });
      await reload();
      return { models: models.map(modelView) };
    },

    /** Replaces the GPU price list in one transaction and tells every process. */
    async setGpuPrices(rows: GpuPriceInput[]) {
      const micros = rows.map((r) => priceMicros(r.name, r.hourly_price));
      const dup = duplicate(rows.map((r) => r.name));
      if (dup) throw new AppError('invalid', `duplicate name "${dup}"`);
      const now = ctx.clock.now();
      await db.transaction(async (tx) => {
        await tx.delete(gpuPrices);
        if (rows.length)
          await tx.insert(gpuPrices).values(
            rows.map((r, position) => ({ id: newId('gpr'), name: r.name, hourlyPriceMicros: micros[position]!, position, updatedAt: now })),
          );
        await ctx.database.notify(CHANNEL, 'gpus', tx);
      });
      await reload();
      return { gpus: gpus.map(gpuView) };
    },

    /** Newest change to either list (the /pricing page's sitemap lastmod); null when both are empty. */
    lastModified(): Date | null {
      return lastChange;
    },
  };
}

export type PricingService = ReturnType<typeof createPricingService>;

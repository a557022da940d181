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
import { UNIT_E4, createPriceGroups, multiplierOf } from './pricing.groups';
import { gpuPrices, modelPrices } from './pricing.tables';

const CHANNEL = 'cpd_pricing';

export interface ModelPrice {
  id: string;
  slug: string;
  unit: PriceUnit;
  priceMicros: bigint;
  /** Per-million prices of prompt, completion and cached prompt tokens as set; null: the default (docs/billing.md). */
  inputPriceMicros: bigint | null;
  outputPriceMicros: bigint | null;
  cachedInputPriceMicros: bigint | null;
}

/** A model's price as the router charges it: every token kind's per-million price resolved, and the group's multiplier. */
export interface EffectivePrice {
  unit: PriceUnit;
  priceMicros: bigint;
  inputMicros: bigint;
  outputMicros: bigint;
  cachedInputMicros: bigint;
  multiplierE4: bigint;
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
function priceMicros(what: string, value: number): bigint;
function priceMicros(what: string, value: number | null | undefined): bigint | null;
function priceMicros(what: string, value: number | null | undefined): bigint | null {
  if (value === null || value === undefined) return null;
  if (!Number.isFinite(value) || value < 0) throw new AppError('invalid', `${what}: price must be a finite non-negative number`);
  const micros = exactMajorToMicros(value);
  if (micros === null) throw new AppError('invalid', `${what}: price must have at most 6 decimals and be below 1000000000000`);
  return micros;
}

/** Absent token prices: input and output cost `price`, cached input the input price. */
function resolved(p: ModelPrice, multiplierE4: bigint): EffectivePrice {
  const input = p.inputPriceMicros ?? p.priceMicros;
  return {
    unit: p.unit,
    priceMicros: p.priceMicros,
    inputMicros: input,
    outputMicros: p.outputPriceMicros ?? p.priceMicros,
    cachedInputMicros: p.cachedInputPriceMicros ?? input,
    multiplierE4,
  };
}

/** A micro-unit price × a multiplier in ten-thousandths, rounded half up (what a group's member sees). */
const times = (micros: bigint, e4: bigint) => (micros * e4 + UNIT_E4 / 2n) / UNIT_E4;

export function createPricingService(ctx: AppContext) {
  const groups = createPriceGroups(ctx);
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
    models = m.map((r) => ({
      id: r.id,
      slug: r.slug,
      unit: r.unit as PriceUnit,
      priceMicros: r.priceMicros,
      inputPriceMicros: r.inputPriceMicros,
      outputPriceMicros: r.outputPriceMicros,
      cachedInputPriceMicros: r.cachedInputPriceMicros,
    }));
    gpus = g.map((r) => ({ id: r.id, name: r.name, hourlyPriceMicros: r.hourlyPriceMicros }));
    bySlug = new Map(models.map((p) => [p.slug, p]));
    const times = [...m, ...g].map((r) => r.updatedAt.getTime());
    lastChange = times.length ? new Date(Math.max(...times)) : null;
  });

  /** The row with the token prices that are set (GET /api/pricing), or every one resolved for a group (GET /api/billing/prices). */
  const modelView = (p: ModelPrice) => ({
    id: p.id,
    slug: p.slug,
    unit: p.unit,
    price: toMajor(p.priceMicros),
    ...(p.inputPriceMicros !== null ? { input_price: toMajor(p.inputPriceMicros) } : {}),
    ...(p.outputPriceMicros !== null ? { output_price: toMajor(p.outputPriceMicros) } : {}),
    ...(p.cachedInputPriceMicros !== null ? { cached_input_price: toMajor(p.cachedInputPriceMicros) } : {}),
    currency,
  });
  const effectiveView = (p: ModelPrice, e4: bigint) => {
    const e = resolved(p, e4);
    const money = (v: bigint) => toMajor(times(v, e4));
    return p.unit === 'per_request'
      ? { id: p.id, slug: p.slug, unit: p.unit, price: money(e.priceMicros), currency }
      : { id: p.id, slug: p.slug, unit: p.unit, price: money(e.priceMicros), input_price: money(e.inputMicros), output_price: money(e.outputMicros), cached_input_price: money(e.cachedInputMicros), currency };
  };
  const gpuView = (p: GpuPrice) => ({ id: p.id, name: p.name, hourly_price: toMajor(p.hourlyPriceMicros), currency });

  return {
    /** Loads the cache and subscribes to changes from other processes; app.ts awaits it once. */
    load: async () => {
      await followChanges(ctx, CHANNEL, reload, 'pricing');
      await groups.load();
    },

    /** The price the gateway charges `userId` (their group's multiplier; none: ×1) for a model slug, from memory; null when unpriced. */
    priceOf(slug: string, userId?: string | null): EffectivePrice | null {
      const p = bySlug.get(slug);
      return p ? resolved(p, groups.groupOf(userId).multiplierE4) : null;
    },

    /** GET /api/billing/prices: the user's group and every model at the prices they pay. */
    pricesFor(userId: string) {
      const g = groups.groupOf(userId);
      return { group: g.name, multiplier: multiplierOf(g.multiplierE4), models: models.map((p) => effectiveView(p, g.multiplierE4)) };
    },

    groups,

    /** The public catalog; `limit` caps each list (models and GPUs) separately. */
    catalog(limit?: number) {
      const n = limit ?? Number.POSITIVE_INFINITY;
      return { models: models.slice(0, n).map(modelView), gpus: gpus.slice(0, n).map(gpuView) };
    },

    /** Replaces the model price list in one transaction and tells every process. */
    async setModelPrices(rows: ModelPriceInput[]) {
      const micros = rows.map((r) => priceMicros(r.slug, r.price));
      const tokenPrices = rows.map((r) => ({
        inputPriceMicros: priceMicros(`${r.slug} input_price`, r.input_price),
        outputPriceMicros: priceMicros(`${r.slug} output_price`, r.output_price),
        cachedInputPriceMicros: priceMicros(`${r.slug} cached_input_price`, r.cached_input_price),
      }));
      const dup = duplicate(rows.map((r) => r.slug));
      if (dup) throw new AppError('invalid', `duplicate slug "${dup}"`);
      const now = ctx.clock.now();
      await db.transaction(async (tx) => {
        await tx.delete(modelPrices);
        if (rows.length)
          await tx.insert(modelPrices).values(
            rows.map((r, position) => ({ id: newId('mpr'), slug: r.slug, unit: r.unit, priceMicros: micros[position]!, ...tokenPrices[position]!, position, updatedAt: now })),
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

import { t } from 'elysia';

export const PRICE_UNITS = ['per_million_tokens', 'per_request'] as const;
export type PriceUnit = (typeof PRICE_UNITS)[number];

/** Largest accepted price in major units: keeps micro-units exact inside a double. */
export const MAX_PRICE = 1_000_000_000;

const price = t.Number({ minimum: 0, maximum: MAX_PRICE });

export const ModelPricesBody = t.Object({
  models: t.Array(
    t.Object({
      slug: t.String({ minLength: 1, maxLength: 200 }),
      unit: t.Union(PRICE_UNITS.map((u) => t.Literal(u))),
      price,
      /** Per million tokens; absent: `price` (cached: the input price). */
      input_price: t.Optional(price),
      output_price: t.Optional(price),
      cached_input_price: t.Optional(price),
    }),
    { maxItems: 10_000 },
  ),
});

export const GpuPricesBody = t.Object({
  gpus: t.Array(t.Object({ name: t.String({ minLength: 1, maxLength: 200 }), hourly_price: price }), { maxItems: 10_000 }),
});

export const PricingQuery = t.Object({ limit: t.Optional(t.Numeric({ minimum: 0, maximum: 10_000, multipleOf: 1 })) });

export type ModelPriceInput = (typeof ModelPricesBody.static)['models'][number];
export type GpuPriceInput = (typeof GpuPricesBody.static)['gpus'][number];

export const PriceGroupsBody = t.Object({
  groups: t.Array(
    t.Object({
      name: t.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,63}$', description: 'lower-case letters, digits, - and _' }),
      multiplier: t.Number({ exclusiveMinimum: 0, maximum: 10, description: '0 < m ≤ 10, at most 4 decimals' }),
      description: t.Optional(t.Union([t.String({ maxLength: 500 }), t.Null()])),
    }),
    { maxItems: 1000 },
  ),
});

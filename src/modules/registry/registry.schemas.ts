import { t } from 'elysia';

export const QUANTS = ['int4', 'int8', 'int326'] as const;
export type Quant = (typeof QUANTS)[number];

/** Bundle slugs: lower-case, start with a letter or digit (DECISIONS §4, issue "Bad input"). */
export const SLUG_PATTERN = /^[a-z0-9][a-z0-9._-]*$/;
export const SDK_PATTERN = /^v(\d{1,6})\.(\d{1,6})$/;

export const ModelRecord = t.Object({
  slug: t.String(),
  name: t.String(),
  family: t.String(),
  sdk: t.String(),
  quants: t.Array(t.String()),
  size_bytes: t.Number(),
  description: t.String(),
});
export type ModelRecord = typeof ModelRecord.static;

export const SlugParams = t.Object({ slug: t.String({ maxLength: 200 }) });

/** Unknown query fields are ignored; quant and sdk are required and checked. */
export const DownloadQuery = t.Object(
  {
    // A pattern, not UnionEnum: Elysia fills a missing UnionEnum query field with its first value.
    quant: t.String({ pattern: `^(${QUANTS.join('|')})$`, error: 'quant must be one of int4, int8, int326' }),
    sdk: t.String({ pattern: SDK_PATTERN.source, error: 'sdk must look like v1.0' }),
    format: t.Optional(t.String()),
    token: t.Optional(t.String()),
  },
  { additionalProperties: true },
);

export const DownloadEnvelope = t.Object({
  mode: t.UnionEnum(['redirect', 'zip']),
  url: t.String(),
  filename: t.String(),
});

export const ModelMetadataBody = t.Object(
  {
    name: t.Optional(t.String({ minLength: 1, maxLength: 200 })),
    family: t.Optional(t.String({ maxLength: 200 })),
    description: t.Optional(t.String({ maxLength: 5000 })),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type ModelMetadata = typeof ModelMetadataBody.static;

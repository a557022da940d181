import { t } from 'elysia';

export const QUANTS = ['int4', 'int8', 'int326'] as const;
export type Quant = (typeof QUANTS)[number];

/** Bundle slugs: lower-case, start with a letter or digit, so a slug is safe in a URL path and a file name. */
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

/**
 * Unknown query fields are ignored. quant and sdk are required, but checked by the service after
 * the credential (401 before 400, as for HEAD), so here they are only documented.
 */
export const DownloadQuery = t.Object(
  {
    quant: t.Optional(t.String({ description: 'int4, int8 or int326 (required)' })),
    sdk: t.Optional(t.String({ description: 'v<major>.<minor>, for example v1.0 (required)' })),
    format: t.Optional(t.String({ description: '"json" selects the {mode, url, filename} envelope' })),
    token: t.Optional(t.String({ description: 'session token (Q), instead of the Authorization header' })),
  },
  // t.Unknown(), not true: the app's TypeBox normalization would drop the signed link's parameters.
  { additionalProperties: t.Unknown() },
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

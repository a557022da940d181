import { t } from 'elysia';

export const CostQuery = t.Object({
  from: t.Optional(t.String({ description: 'ISO 8601 start (inclusive); default: 30 days before `to`' })),
  to: t.Optional(t.String({ description: 'ISO 8601 end (exclusive); default: now' })),
  group_by: t.Optional(t.String({ description: 'comma-separated: user, model, entrypoint' })),
});

export const CostRowSchema = t.Object({
  user: t.Optional(t.String()),
  model: t.Optional(t.String()),
  entrypoint: t.Optional(t.String()),
  cost_usd: t.Number(),
  tokens: t.Integer(),
});

export const CostResponse = t.Object({
  from: t.String(),
  to: t.String(),
  group_by: t.Array(t.String()),
  items: t.Array(CostRowSchema),
});

export const BackendsBody = t.Object({
  backends: t.Array(
    t.Object({
      model: t.String({ minLength: 1, maxLength: 200, description: 'model slug served by this backend' }),
      url: t.String({ minLength: 1, maxLength: 2000, description: 'the upstream OpenAI base URL (http or https)' }),
      api_key: t.Optional(
        t.Union([t.String({ minLength: 1, maxLength: 4096 }), t.Null()], {
          description: 'write-only; sent upstream as Authorization: Bearer. Omitted: keep the stored key of this model and URL; null: remove it',
        }),
      ),
      weight: t.Optional(t.Integer({ minimum: 1, maximum: 100, description: 'share of the model\'s traffic (default 1)' })),
      enabled: t.Optional(t.Boolean({ description: 'default true' })),
    }),
    { maxItems: 1000 },
  ),
});

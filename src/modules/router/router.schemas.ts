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

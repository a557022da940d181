import { t } from 'elysia';

export const CostQuery = t.Object({
  from: t.Optional(t.String({ description: 'ISO 8601 start (inclusive); default: 30 days before `to`' })),
  to: t.Optional(t.String({ description: 'ISO 8601 end (exclusive); default: now' })),
  group_by: t.Optional(t.String({ description: 'comma-separated: user, model, entrypoint; with org_id also member' })),
  org_id: t.Optional(t.String({ minLength: 1, maxLength: 64, description: "an organization's usage (its owners and admins)" })),
  currency: t.Optional(t.UnionEnum(['usd', 'site'], { description: "site: each row also has `cost` in the site's currency and that `currency`" })),
});

export const UsageQuery = t.Object({
  from: t.Optional(t.String({ description: 'ISO 8601 start (inclusive)' })),
  to: t.Optional(t.String({ description: 'ISO 8601 end (exclusive)' })),
  model: t.Optional(t.String({ minLength: 1, maxLength: 200 })),
  key_id: t.Optional(t.String({ minLength: 1, maxLength: 64 })),
  org_id: t.Optional(t.String({ minLength: 1, maxLength: 64, description: "an organization's usage (its owners and admins)" })),
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 200, default: 50 })),
  cursor: t.Optional(t.String({ minLength: 1 })),
});

export const UsageResponse = t.Object({
  usage: t.Array(
    t.Object({
      id: t.String(),
      created_at: t.String(),
      entrypoint: t.String(),
      model: t.String(),
      key_id: t.Union([t.String(), t.Null()]),
      key_name: t.Union([t.String(), t.Null()], { description: "the key's name, also after it was revoked; null for calls without a key" }),
      key_revoked: t.Boolean(),
      prompt_tokens: t.Integer(),
      completion_tokens: t.Integer(),
      cost: t.Number(),
      currency: t.String(),
      status: t.Integer(),
      streamed: t.Boolean(),
      latency_ms: t.Integer(),
      clamped: t.Boolean({ description: 'the completion was billed at the request maximum, below the completion_tokens the upstream reported' }),
      cached_tokens: t.Integer({ description: 'prompt tokens served from the upstream cache (within prompt_tokens), billed at the cached input price' }),
      reasoning_tokens: t.Integer({ description: 'reasoning tokens (within completion_tokens)' }),
    }),
  ),
  next_cursor: t.Union([t.String(), t.Null()]),
});

export const CostRowSchema = t.Object({
  user: t.Optional(t.String()),
  member: t.Optional(t.String({ description: "the email of the organization's member whose keys made the requests (group_by=member)" })),
  model: t.Optional(t.String()),
  entrypoint: t.Optional(t.String()),
  cost_usd: t.Number(),
  cost: t.Optional(t.Number({ description: "in the site's currency (currency=site)" })),
  currency: t.Optional(t.String()),
  tokens: t.Integer(),
});

export const CostResponse = t.Object({
  from: t.String(),
  to: t.String(),
  group_by: t.Array(t.String()),
  items: t.Array(CostRowSchema),
});

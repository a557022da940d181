import { t } from 'elysia';

export const CaptureQuery = t.Object({
  from: t.Optional(t.String({ description: 'ISO 8601 start (inclusive)' })),
  to: t.Optional(t.String({ description: 'ISO 8601 end (exclusive)' })),
  model: t.Optional(t.String({ minLength: 1, maxLength: 200, description: 'the model that served' })),
  key_id: t.Optional(t.String({ minLength: 1, maxLength: 64 })),
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 200, default: 50 })),
  cursor: t.Optional(t.String({ minLength: 1 })),
});
export const AdminCaptureQuery = t.Object({ ...CaptureQuery.properties, user_id: t.Optional(t.String({ minLength: 1, maxLength: 64 })) });

export const CaptureIdParams = t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) });

const Capture = t.Object({
  id: t.String(),
  created_at: t.String(),
  expires_at: t.String(),
  user_id: t.String(),
  key_id: t.Nullable(t.String()),
  endpoint: t.String({ description: 'chat, embeddings, responses or messages' }),
  entrypoint: t.String({ description: 'what the caller asked for; `replay` for a replay' }),
  model: t.String({ description: 'the model that served' }),
  status: t.Integer(),
  latency_ms: t.Integer(),
  backend: t.Nullable(t.String()),
  usage_id: t.Nullable(t.String()),
  streamed: t.Boolean(),
  prompt_tokens: t.Integer(),
  completion_tokens: t.Integer(),
  cost: t.Number(),
  currency: t.String(),
  request_truncated: t.Boolean(),
  response_truncated: t.Boolean(),
  replay_of: t.Nullable(t.String()),
});

export const CaptureList = t.Object({ captures: t.Array(Capture), next_cursor: t.Nullable(t.String()) });
export const CaptureDetail = t.Object({
  ...Capture.properties,
  request: t.Unknown({ description: 'the request body as received (a string: its JSON cut at the size limit)' }),
  response: t.Unknown({ description: 'the JSON answer, or a stream\'s {text, tool_calls, usage, finish_reason}, or {error}' }),
});

export const CaptureSettingsBody = t.Object({
  rules: t.Array(
    t.Object({
      user_id: t.Optional(t.String({ minLength: 1, maxLength: 64 })),
      model: t.Optional(t.String({ minLength: 1, maxLength: 200, description: 'a model slug or route name, as asked' })),
      sample: t.Number({ minimum: 0, maximum: 1, description: 'the share of matching requests captured' }),
    }),
    { maxItems: 100, description: 'the first rule matching a request decides' },
  ),
  retention_days: t.Integer({ minimum: 1, maximum: 365 }),
});

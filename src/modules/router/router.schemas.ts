import { t } from 'elysia';

export const BackendsBody = t.Object({
  backends: t.Array(
    t.Object({
      model: t.String({ minLength: 1, maxLength: 200, description: 'model slug served by this backend' }),
      url: t.String({ minLength: 1, maxLength: 2000, description: 'the upstream base URL (http or https): an OpenAI base URL (…/v1), or for format anthropic the base URL that /v1/messages follows' }),
      api_key: t.Optional(
        t.Union([t.String({ minLength: 1, maxLength: 4096 }), t.Null()], {
          description: 'write-only; sent upstream as Authorization: Bearer (x-api-key for format anthropic). Omitted: keep the stored key of this model and URL; null: remove it',
        }),
      ),
      weight: t.Optional(t.Integer({ minimum: 1, maximum: 100, description: 'share of the model\'s traffic (default 1)' })),
      enabled: t.Optional(t.Boolean({ description: 'default true' })),
      format: t.Optional(
        t.Union([t.Literal('openai'), t.Literal('anthropic')], {
          description: 'the protocol the backend speaks: openai (chat completions, the default) or anthropic (Messages API: /v1/messages is passed through, with x-api-key)',
        }),
      ),
    }),
    { maxItems: 1000 },
  ),
});

/**
 * Settings of the outbound webhooks (modules/webhooks). WEBHOOK_ALLOW_PRIVATE=true lets endpoints
 * be plain http and resolve to loopback, private or link-local addresses: for a receiver on the
 * operator's own network or a developer's machine, never on a site the public uses.
 */
import { oneOf } from './config-parse';

export interface WebhookSettings {
  allowPrivate: boolean;
}

type Get = (name: string) => string | undefined;

export function webhookSettings(get: Get): WebhookSettings {
  return { allowPrivate: oneOf('WEBHOOK_ALLOW_PRIVATE', get('WEBHOOK_ALLOW_PRIVATE') ?? 'false', ['true', 'false'] as const) === 'true' };
}

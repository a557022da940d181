/**
 * POST /api/payments/webhooks/{provider}: the signature is checked on the raw body before anything
 * is read; then a payment's outcome is settled, or refunds and disputes are applied.
 */
import type { PaymentProviderId } from '../../config';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import type { Payments } from './payments.service';
import { BadSignatureError, type PaymentProvider, type ProviderNotice } from './providers';
import type { Refunds } from './refunds.service';

export function createNotifications(ctx: AppContext, providers: Map<PaymentProviderId, PaymentProvider>, payments: Payments, refunds: Refunds) {
  const { log } = ctx;

  async function handle(providerId: string, rawBody: string, headers: Headers): Promise<Response> {
    const provider = providers.get(providerId as PaymentProviderId);
    if (!provider) throw new AppError('not_found', 'unknown payment provider');
    try {
      await provider.verifyNotification(rawBody, headers);
    } catch (err) {
      if (!(err instanceof BadSignatureError)) log.warn({ err, provider: providerId }, 'notification verification failed');
      throw new AppError('invalid', 'notification signature is not valid');
    }
    let notice: ProviderNotice | null;
    try {
      notice = await provider.parseNotification(rawBody, headers);
    } catch (err) {
      log.warn({ err, provider: providerId }, 'signed notification could not be read');
      // Reading a refund notice may ask the provider (the refunds of a charge): a failure there is
      // the provider's, and any answer but its acknowledgement makes it send the notice again.
      if (err instanceof SyntaxError) throw new AppError('invalid', 'notification body is not valid');
      throw new AppError('upstream', 'the notification could not be checked with the payment provider; it will be sent again');
    }
    if (notice?.kind === 'payment') await payments.settle(provider.id, notice.report, 'notification');
    if (notice?.kind === 'refunds') await refunds.applyReports(provider.id, notice.refunds);
    return provider.acknowledge();
  }

  return { handle };
}

export type Notifications = ReturnType<typeof createNotifications>;

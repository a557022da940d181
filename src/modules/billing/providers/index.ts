import type { AppContext } from '../../../platform/context';
import type { PaymentProviderId } from '../../../config';
import type { PaymentProvider } from './provider';
import { sandboxProvider } from './sandbox';

/** The enabled providers' adapters, by id: the sandbox in sandbox mode, the real ones in live mode. */
export function createProviders(ctx: AppContext): Map<PaymentProviderId, PaymentProvider> {
  const { config } = ctx;
  return new Map(config.paymentProviders.map((id) => [id, sandboxProvider(id, config)] as const));
}

export { BadSignatureError, type PaymentProvider, type ProviderReport } from './provider';

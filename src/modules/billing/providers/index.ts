import type { PaymentProviderId } from '../../../config';
import type { AppContext } from '../../../app-context';
import { alipayProvider } from './alipay';
import type { PaymentProvider } from './provider';
import { sandboxProvider } from './sandbox';
import { stripeProvider } from './stripe';
import { wechatProvider } from './wechat';

/** The enabled providers' adapters, by id: the sandbox in sandbox mode, the real ones in live mode. */
export function createProviders(ctx: AppContext): Map<PaymentProviderId, PaymentProvider> {
  const { config } = ctx;
  const creds = config.paymentCredentials;
  const live = (id: PaymentProviderId): PaymentProvider => {
    // config.ts guarantees the credentials of every provider enabled in live mode.
    if (id === 'card') return stripeProvider(creds.card!, config);
    if (id === 'chat_wallet') return wechatProvider(creds.chatWallet!, config);
    return alipayProvider(creds.appWallet!, config);
  };
  return new Map(config.paymentProviders.map((id) => [id, config.paymentMode === 'live' ? live(id) : sandboxProvider(id, config)] as const));
}

export { BadSignatureError, RefundRefusedError, type PaymentProvider, type ProviderNotice, type ProviderReport, type RefundOutcome, type RefundReport, type RefundRequest } from './provider';

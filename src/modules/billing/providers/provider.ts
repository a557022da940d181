/**
 * What billing needs from a payment provider. Adapters are looked up by provider id (card,
 * chat_wallet, app_wallet): the sandbox adapter in PAYMENT_MODE=sandbox, Stripe / WeChat Pay /
 * Alipay in live mode. Every adapter reports amounts in micro-units of the order's currency.
 */
import type { PaymentProviderId } from '../../../config';

export interface OrderRequest {
  paymentId: string;
  amountMicros: bigint;
  currency: 'USD' | 'CNY';
  description: string;
  expiresAt: Date;
}

export interface CreatedOrder {
  redirectUrl?: string;
  qrCodeUrl?: string;
  /** The provider's own order id when it issues one now (Stripe Checkout session id). */
  providerOrderId?: string;
  expiresAt: Date;
}

/** What a verified notification or an order query says about one of our payments. */
export interface ProviderReport {
  /** Our payment id (client_reference_id, out_trade_no). */
  paymentId: string;
  status: 'paid' | 'failed' | 'expired' | 'pending';
  /** The provider's transaction id, once paid. */
  providerReference?: string;
  /** What was actually paid (checked against the order before crediting). */
  amountMicros?: bigint;
  currency?: string;
}

export interface OrderRef {
  id: string;
  providerOrderId: string | null;
}

export interface PaymentProvider {
  id: PaymentProviderId;
  name: string;
  createOrder(order: OrderRequest): Promise<CreatedOrder>;
  /** Checks the signature over the RAW body exactly as received; throws BadSignatureError otherwise. */
  verifyNotification(rawBody: string, headers: Headers): Promise<void>;
  /** A verified notification → its report, or null when it is not about a payment's outcome. */
  parseNotification(rawBody: string, headers: Headers): Promise<ProviderReport | null>;
  /** Asks the provider for the order's state (fallback when a notification was lost). */
  queryOrder(order: OrderRef): Promise<ProviderReport>;
  /** Closes an unpaid order so it can no longer be paid; safe on an order already closed. */
  closeOrder(order: OrderRef): Promise<void>;
  /** The body the provider expects once a notification has been processed. */
  acknowledge(): Response;
}

/** Thrown by verifyNotification: the request did not come from the provider (400, nothing read). */
export class BadSignatureError extends Error {}

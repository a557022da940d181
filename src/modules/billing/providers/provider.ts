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

/** A refund cpd asks for: `refundId` is ours, and the provider keeps it (idempotency key, out_refund_no, out_request_no). */
export interface RefundRequest {
  refundId: string;
  paymentId: string;
  /** The provider's transaction id of the paid payment (Stripe PaymentIntent, WeChat transaction_id, Alipay trade_no). */
  providerReference: string | null;
  /** What the payment was for, and how much of it to refund now (micro-units of whole minor units). */
  paymentAmountMicros: bigint;
  amountMicros: bigint;
  currency: string;
  reason: string;
  /** The provider's id of this refund once known (asking about it). */
  providerRefundId: string | null;
}

/** Where a refund stands at the provider: money on its way (pending), returned (succeeded), or not refunded (failed). */
export interface RefundOutcome {
  status: 'pending' | 'succeeded' | 'failed';
  providerRefundId?: string;
  /** The provider's words when it failed. */
  failure?: string;
}

/**
 * A refund or dispute that a verified notification reports (or that the provider answered when
 * asked about the refunds of a payment). Disputes are chargebacks: open and lost hold the money
 * back, won gives it back.
 */
export interface RefundReport {
  /** Our payment id. */
  paymentId: string;
  kind: 'refund' | 'dispute';
  /** The provider's id of the refund or dispute. */
  providerRefundId: string;
  /** Ours, when cpd asked for this refund. */
  refundId?: string;
  amountMicros: bigint;
  currency?: string;
  status: 'pending' | 'succeeded' | 'failed' | 'open' | 'won' | 'lost';
}

/** A verified notification: about a payment's outcome, or about refunds and disputes of one. */
export type ProviderNotice = { kind: 'payment'; report: ProviderReport } | { kind: 'refunds'; refunds: RefundReport[] };

export interface PaymentProvider {
  id: PaymentProviderId;
  name: string;
  createOrder(order: OrderRequest): Promise<CreatedOrder>;
  /** Checks the signature over the RAW body exactly as received; throws BadSignatureError otherwise. */
  verifyNotification(rawBody: string, headers: Headers): Promise<void>;
  /** A verified notification → what it reports, or null when it is about nothing cpd keeps. */
  parseNotification(rawBody: string, headers: Headers): Promise<ProviderNotice | null>;
  /** Asks the provider for the order's state (fallback when a notification was lost). */
  queryOrder(order: OrderRef): Promise<ProviderReport>;
  /** Closes an unpaid order so it can no longer be paid; safe on an order already closed. */
  closeOrder(order: OrderRef): Promise<void>;
  /** The body the provider expects once a notification has been processed. */
  acknowledge(): Response;
  /**
   * Refunds part of a paid payment, idempotently on `refundId` (the same id never refunds twice).
   * Throws RefundRefusedError when the provider answered that it will not; any other error
   * leaves it unknown whether the provider got the request.
   */
  refund(request: RefundRequest): Promise<RefundOutcome>;
  /** Where a refund cpd asked for stands at the provider; null when the provider has no such refund. */
  queryRefund(request: RefundRequest): Promise<RefundOutcome | null>;
}

/** Thrown by verifyNotification: the request did not come from the provider (400, nothing read). */
export class BadSignatureError extends Error {}

/** Thrown by refund: the provider answered that it refunds nothing (the message is its reason). */
export class RefundRefusedError extends Error {}

/**
 * The built-in provider of PAYMENT_MODE=sandbox. Its "checkout" is a page of this server whose
 * Pay / Fail buttons make the signed notification a live provider would send (HMAC-SHA256 with
 * SECRET_KEY), which then goes through the same webhook handling as a live notification. A refund
 * succeeds at once (no money moves).
 */
import type { Config, PaymentProviderId } from '../../../config';
import { hmacHex, safeEqual } from '../../../platform/crypto';
import { randomBase62 } from '../../../platform/ids';
import { decimalStringToMicros } from '../money';
import { BadSignatureError, type PaymentProvider, type ProviderNotice } from './provider';

export const SANDBOX_SIGNATURE_HEADER = 'x-sandbox-signature';

export const PROVIDER_NAMES: Record<PaymentProviderId, string> = {
  card: 'Card',
  chat_wallet: 'Chat wallet',
  app_wallet: 'App wallet',
};

export const sandboxPagePath = (paymentId: string) => `/api/payments/sandbox/${paymentId}`;

interface SandboxNotice {
  payment_id: string;
  status: 'paid' | 'failed';
  amount: string;
  currency: string;
  transaction_id: string;
}

/** Builds the notification the sandbox "provider" sends for a decision on its checkout page. */
export function signSandboxNotification(secret: string, notice: Omit<SandboxNotice, 'transaction_id'>, at = Date.now()) {
  const body = JSON.stringify({ ...notice, transaction_id: `sbx_${randomBase62(20)}` } satisfies SandboxNotice);
  const t = Math.floor(at / 1000);
  return { body, headers: new Headers({ 'content-type': 'application/json', [SANDBOX_SIGNATURE_HEADER]: `t=${t},v1=${hmacHex(secret, `${t}.${body}`)}` }) };
}

export function sandboxProvider(id: PaymentProviderId, config: Config): PaymentProvider {
  const page = (paymentId: string) => `${config.publicUrl}${sandboxPagePath(paymentId)}`;
  return {
    id,
    name: PROVIDER_NAMES[id],
    async createOrder(order) {
      return id === 'card'
        ? { redirectUrl: page(order.paymentId), expiresAt: order.expiresAt }
        : { qrCodeUrl: `${page(order.paymentId)}/qr.svg`, expiresAt: order.expiresAt };
    },
    async verifyNotification(rawBody, headers) {
      const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(headers.get(SANDBOX_SIGNATURE_HEADER) ?? '');
      if (!m || !safeEqual(hmacHex(config.secretKey(), `${m[1]}.${rawBody}`), m[2]!)) throw new BadSignatureError('bad sandbox signature');
    },
    async parseNotification(rawBody): Promise<ProviderNotice> {
      const n = JSON.parse(rawBody) as SandboxNotice;
      return {
        kind: 'payment',
        report: {
          paymentId: n.payment_id,
          status: n.status,
          providerReference: n.transaction_id,
          amountMicros: decimalStringToMicros(n.amount) ?? undefined,
          currency: n.currency,
        },
      };
    },
    // The sandbox keeps no state of its own: what it knows reached us as notifications.
    async queryOrder(order) {
      return { paymentId: order.id, status: 'pending' };
    },
    async closeOrder() {},
    acknowledge: () => Response.json({ received: true }),
    async refund(request) {
      return { status: 'succeeded', providerRefundId: `sbx_${request.refundId}` };
    },
    async queryRefund() {
      return null;
    },
  };
}


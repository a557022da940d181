/**
 * card in live mode: Stripe Checkout through the official `stripe` package. client_reference_id
 * carries our payment id; webhooks are verified by the package (constructEventAsync: under Bun the
 * package verifies with WebCrypto, which is async-only). Refunds go through the Refunds API with
 * our refund id as metadata and idempotency key; refund and dispute events name a PaymentIntent,
 * which the Checkout Session that made it maps back to our payment.
 */
import type Stripe from 'stripe';
import type { Config, PaymentCredentials } from '../../../config';
import { toMinorUnits, fromMinorUnits } from '../money';
import { BadSignatureError, type PaymentProvider, type ProviderNotice, type ProviderReport, type RefundOutcome, type RefundReport, RefundRefusedError } from './provider';
import { PROVIDER_NAMES } from './sandbox';

/** Stripe wants expires_at at least 30 minutes after it creates the session: give it a margin; we close it at our own expiry. */
const STRIPE_EXPIRY_MARGIN_MS = 5 * 60_000;

function sessionReport(session: Stripe.Checkout.Session): ProviderReport {
  const paymentId = session.client_reference_id ?? '';
  const base = {
    paymentId,
    amountMicros: session.amount_total === null ? undefined : fromMinorUnits(session.amount_total),
    currency: session.currency?.toUpperCase(),
  };
  if (session.payment_status === 'paid' || session.payment_status === 'no_payment_required') {
    const intent = typeof session.payment_intent === 'string' ? session.payment_intent : session.payment_intent?.id;
    return { ...base, status: 'paid', providerReference: intent ?? session.id };
  }
  if (session.status === 'expired') return { ...base, status: 'expired' };
  return { ...base, status: 'pending' };
}

/** Stripe refund statuses: pending and requires_action are money on its way; failed and canceled never left. */
function refundOutcome(refund: Stripe.Refund): RefundOutcome {
  if (refund.status === 'succeeded') return { status: 'succeeded', providerRefundId: refund.id };
  if (refund.status === 'failed' || refund.status === 'canceled')
    return { status: 'failed', providerRefundId: refund.id, failure: refund.failure_reason ?? refund.status };
  return { status: 'pending', providerRefundId: refund.id };
}

const refundReport = (paymentId: string, refund: Stripe.Refund): RefundReport => ({
  paymentId,
  kind: 'refund',
  providerRefundId: refund.id,
  refundId: refund.metadata?.refund_id,
  amountMicros: fromMinorUnits(refund.amount),
  currency: refund.currency.toUpperCase(),
  status: refundOutcome(refund).status,
});

/**
 * A dispute's money: open disputes and lost ones hold the amount back, a won one gives it back.
 * Inquiries (warning_*) and prevented disputes move no money: null.
 */
function disputeStatus(status: string): RefundReport['status'] | null {
  if (status.startsWith('warning_') || status === 'prevented') return null;
  if (status === 'won' || status === 'lost') return status;
  return 'open';
}

/** Stripe answered that it will not (a 4xx other than a conflict or rate limit): nothing was refunded. */
const refusedByStripe = (err: unknown) => {
  const status = (err as { statusCode?: number }).statusCode ?? 0;
  return status >= 400 && status < 500 && status !== 409 && status !== 429;
};

const intentOf = (x: string | { id: string } | null | undefined) => (typeof x === 'string' ? x : (x?.id ?? null));

export function stripeProvider(creds: NonNullable<PaymentCredentials['card']>, config: Config): PaymentProvider {
  const api = new URL(creds.apiUrl);
  // The SDK takes ~8 ms to load: imported at first use, not at every start-up (docs/design/start-up.md).
  let client: Promise<Stripe> | null = null;
  const stripe = () =>
    (client ??= import('stripe').then(
      ({ default: StripeClient }) =>
        new StripeClient(creds.secretKey, {
          host: api.hostname,
          port: Number(api.port || (api.protocol === 'https:' ? 443 : 80)),
          protocol: api.protocol === 'https:' ? 'https' : 'http',
          maxNetworkRetries: 2,
          timeout: 15_000,
        }),
    ));

  /** Our payment of a PaymentIntent: the client_reference_id of the Checkout Session that made it; null when cpd did not. */
  async function paymentIdOf(paymentIntent: string | null): Promise<string | null> {
    if (!paymentIntent) return null;
    const sessions = await (await stripe()).checkout.sessions.list({ payment_intent: paymentIntent, limit: 1 });
    return sessions.data[0]?.client_reference_id ?? null;
  }

  /**
   * Every refund of a PaymentIntent, asked of Stripe: charge.refunded carries only the charge's
   * total, so two partial refunds whose events arrive in either order are each found by their id.
   */
  async function refundsOf(paymentIntent: string | null): Promise<ProviderNotice | null> {
    const paymentId = await paymentIdOf(paymentIntent);
    if (!paymentId || !paymentIntent) return null;
    const refunds: RefundReport[] = [];
    for await (const refund of (await stripe()).refunds.list({ payment_intent: paymentIntent, limit: 100 })) refunds.push(refundReport(paymentId, refund));
    return { kind: 'refunds', refunds };
  }

  return {
    id: 'card',
    name: PROVIDER_NAMES.card,
    async createOrder(order) {
      const session = await (await stripe()).checkout.sessions.create(
        {
          mode: 'payment',
          client_reference_id: order.paymentId,
          metadata: { payment_id: order.paymentId },
          line_items: [
            { quantity: 1, price_data: { currency: order.currency.toLowerCase(), unit_amount: toMinorUnits(order.amountMicros), product_data: { name: order.description } } },
          ],
          success_url: `${config.publicUrl}/?payment=${order.paymentId}`,
          cancel_url: `${config.publicUrl}/?payment=${order.paymentId}`,
          expires_at: Math.floor((order.expiresAt.getTime() + STRIPE_EXPIRY_MARGIN_MS) / 1000),
        },
        { idempotencyKey: `cpd-create-${order.paymentId}` },
      );
      if (!session.url) throw new Error('Stripe returned a Checkout Session without a url');
      return { redirectUrl: session.url, providerOrderId: session.id, expiresAt: order.expiresAt };
    },
    async verifyNotification(rawBody, headers) {
      try {
        await (await stripe()).webhooks.constructEventAsync(rawBody, headers.get('stripe-signature') ?? '', creds.webhookSecret);
      } catch (err) {
        throw new BadSignatureError(String(err));
      }
    },
    async parseNotification(rawBody): Promise<ProviderNotice | null> {
      const event = JSON.parse(rawBody) as Stripe.Event;
      // Sessions not created by cpd (no client_reference_id) are acknowledged and ignored.
      if (event.type.startsWith('checkout.session.') && !(event.data.object as Stripe.Checkout.Session).client_reference_id) return null;
      const payment = (report: ProviderReport): ProviderNotice => ({ kind: 'payment', report });
      switch (event.type) {
        case 'checkout.session.completed':
        case 'checkout.session.async_payment_succeeded':
        case 'checkout.session.expired':
          return payment(sessionReport(event.data.object));
        case 'checkout.session.async_payment_failed':
          return payment({ ...sessionReport(event.data.object), status: 'failed' });
        case 'charge.refunded':
          return refundsOf(intentOf(event.data.object.payment_intent));
        case 'charge.refund.updated': {
          const refund = event.data.object;
          const paymentId = await paymentIdOf(intentOf(refund.payment_intent));
          return paymentId ? { kind: 'refunds', refunds: [refundReport(paymentId, refund)] } : null;
        }
        case 'charge.dispute.created':
        case 'charge.dispute.closed': {
          const dispute = event.data.object;
          const status = disputeStatus(dispute.status);
          const paymentId = status && (await paymentIdOf(intentOf(dispute.payment_intent)));
          if (!status || !paymentId) return null;
          const report: RefundReport = {
            paymentId,
            kind: 'dispute',
            providerRefundId: dispute.id,
            amountMicros: fromMinorUnits(dispute.amount),
            currency: dispute.currency.toUpperCase(),
            status,
          };
          return { kind: 'refunds', refunds: [report] };
        }
        default:
          return null;
      }
    },
    async queryOrder(order) {
      if (!order.providerOrderId) return { paymentId: order.id, status: 'pending' };
      return sessionReport(await (await stripe()).checkout.sessions.retrieve(order.providerOrderId));
    },
    async closeOrder(order) {
      if (!order.providerOrderId) return;
      const { checkout } = await stripe();
      const session = await checkout.sessions.retrieve(order.providerOrderId);
      if (session.status === 'open') await checkout.sessions.expire(order.providerOrderId);
    },
    acknowledge: () => Response.json({ received: true }),
    async refund(request) {
      try {
        const refund = await (await stripe()).refunds.create(
          {
            payment_intent: request.providerReference ?? '',
            amount: toMinorUnits(request.amountMicros),
            metadata: { refund_id: request.refundId, payment_id: request.paymentId, reason: request.reason },
          },
          { idempotencyKey: `cpd-refund-${request.refundId}` },
        );
        return refundOutcome(refund);
      } catch (err) {
        if (refusedByStripe(err)) throw new RefundRefusedError((err as Error).message);
        throw err;
      }
    },
    async queryRefund(request) {
      const api = await stripe();
      if (request.providerRefundId) return refundOutcome(await api.refunds.retrieve(request.providerRefundId));
      if (!request.providerReference) return null;
      for await (const refund of api.refunds.list({ payment_intent: request.providerReference, limit: 100 }))
        if (refund.metadata?.refund_id === request.refundId) return refundOutcome(refund);
      return null;
    },
  };
}

/**
 * card in live mode: Stripe Checkout through the official `stripe` package. client_reference_id
 * carries our payment id; webhooks are verified by the package (constructEventAsync: under Bun the
 * package verifies with WebCrypto, which is async-only).
 */
import type Stripe from 'stripe';
import type { Config, PaymentCredentials } from '../../../config';
import { toMinorUnits, fromMinorUnits } from '../money';
import { BadSignatureError, type PaymentProvider, type ProviderReport } from './provider';
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

export function stripeProvider(creds: NonNullable<PaymentCredentials['card']>, config: Config): PaymentProvider {
  const api = new URL(creds.apiUrl);
  // The SDK takes ~8 ms to load: imported at first use, not at every start-up (docs/operations.md).
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
    async parseNotification(rawBody) {
      const event = JSON.parse(rawBody) as Stripe.Event;
      // Sessions not created by cpd (no client_reference_id) are acknowledged and ignored.
      if (event.type.startsWith('checkout.session.') && !(event.data.object as Stripe.Checkout.Session).client_reference_id) return null;
      switch (event.type) {
        case 'checkout.session.completed':
        case 'checkout.session.async_payment_succeeded':
        case 'checkout.session.expired':
          return sessionReport(event.data.object);
        case 'checkout.session.async_payment_failed':
          return { ...sessionReport(event.data.object), status: 'failed' };
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
  };
}

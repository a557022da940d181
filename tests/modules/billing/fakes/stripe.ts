/**
 * A local Stripe API for the Checkout endpoints billing uses, and webhook events signed exactly as
 * Stripe signs them (the `stripe` package's own test header generator: t=…,v1=HMAC-SHA256).
 */
import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';

export interface FakeSession {
  id: string;
  object: 'checkout.session';
  url: string;
  client_reference_id: string | null;
  amount_total: number;
  currency: string;
  status: 'open' | 'complete' | 'expired';
  payment_status: 'unpaid' | 'paid';
  payment_intent: string | null;
  expires_at: number;
  metadata: Record<string, string>;
}

export function startFakeStripe(opts: { secretKey: string; webhookSecret: string }) {
  const sessions = new Map<string, FakeSession>();
  const requests: string[] = [];
  const stripeError = (status: number, message: string) =>
    Response.json({ error: { type: 'invalid_request_error', message } }, { status });

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      requests.push(`${req.method} ${url.pathname}`);
      if (req.headers.get('authorization') !== `Bearer ${opts.secretKey}`) return stripeError(401, 'Invalid API Key provided');
      if (req.method === 'POST' && url.pathname === '/v1/checkout/sessions') {
        const form = new URLSearchParams(await req.text());
        const id = `cs_test_${randomBytes(12).toString('hex')}`;
        const session: FakeSession = {
          id,
          object: 'checkout.session',
          url: `https://checkout.stripe.test/c/pay/${id}`,
          client_reference_id: form.get('client_reference_id'),
          amount_total: Number(form.get('line_items[0][price_data][unit_amount]')) * Number(form.get('line_items[0][quantity]') ?? 1),
          currency: form.get('line_items[0][price_data][currency]') ?? '',
          status: 'open',
          payment_status: 'unpaid',
          payment_intent: null,
          expires_at: Number(form.get('expires_at')),
          metadata: { payment_id: form.get('metadata[payment_id]') ?? '' },
        };
        if (!form.get('success_url') || form.get('mode') !== 'payment') return stripeError(400, 'missing mode or success_url');
        sessions.set(id, session);
        return Response.json(session);
      }
      const m = /^\/v1\/checkout\/sessions\/([^/]+)(\/expire)?$/.exec(url.pathname);
      const session = m ? sessions.get(m[1]!) : undefined;
      if (!session) return stripeError(404, 'No such checkout.session');
      if (req.method === 'GET' && !m![2]) return Response.json(session);
      if (req.method === 'POST' && m![2]) {
        if (session.status !== 'open') return stripeError(400, 'Only Checkout Sessions with a status of open can be expired.');
        session.status = 'expired';
        return Response.json(session);
      }
      return stripeError(404, 'unknown endpoint');
    },
  });

  const signer = new Stripe(opts.secretKey);
  async function event(type: string, session: FakeSession) {
    const payload = JSON.stringify({ id: `evt_${randomBytes(8).toString('hex')}`, object: 'event', type, data: { object: session } });
    const header = await signer.webhooks.generateTestHeaderStringAsync({ payload, secret: opts.webhookSecret });
    return { body: payload, headers: { 'content-type': 'application/json', 'stripe-signature': header } };
  }

  return {
    url: `http://127.0.0.1:${server.port}`,
    sessions,
    requests,
    event,
    sessionFor: (paymentId: string) => [...sessions.values()].find((s) => s.client_reference_id === paymentId)!,
    /** The customer pays: the session completes; returns the signed checkout.session.completed event. */
    pay(paymentId: string, amountTotal?: number) {
      const s = [...sessions.values()].find((x) => x.client_reference_id === paymentId)!;
      Object.assign(s, { status: 'complete', payment_status: 'paid', payment_intent: `pi_${randomBytes(8).toString('hex')}` });
      if (amountTotal !== undefined) s.amount_total = amountTotal;
      return event('checkout.session.completed', s);
    },
    expireEvent(paymentId: string) {
      const s = [...sessions.values()].find((x) => x.client_reference_id === paymentId)!;
      s.status = 'expired';
      return event('checkout.session.expired', s);
    },
    stop: () => server.stop(true),
  };
}

/**
 * A local Stripe API for the Checkout and Refunds endpoints billing uses, and webhook events
 * signed exactly as Stripe signs them (the `stripe` package's own test header generator:
 * t=…,v1=HMAC-SHA256). A paid session has a PaymentIntent and a Charge; refunds and disputes are
 * made on that charge, by cpd through the API or "at the dashboard" by the test.
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

export interface FakeCharge {
  id: string;
  object: 'charge';
  amount: number;
  amount_refunded: number;
  currency: string;
  payment_intent: string;
  refunded: boolean;
  disputed: boolean;
  status: 'succeeded';
}

export interface FakeRefund {
  id: string;
  object: 'refund';
  amount: number;
  charge: string;
  currency: string;
  payment_intent: string;
  status: 'succeeded' | 'pending' | 'failed' | 'canceled';
  metadata: Record<string, string>;
  reason: string | null;
  created: number;
}

export interface FakeDispute {
  id: string;
  object: 'dispute';
  amount: number;
  charge: string;
  currency: string;
  payment_intent: string;
  reason: string;
  status: string;
  created: number;
}

/** Stripe's form encoding of `metadata[key]=value` back into an object. */
const metadataOf = (form: URLSearchParams) =>
  Object.fromEntries([...form].flatMap(([k, v]) => (/^metadata\[(.+)\]$/.exec(k) ? [[/^metadata\[(.+)\]$/.exec(k)![1]!, v]] : [])));

export function startFakeStripe(opts: { secretKey: string; webhookSecret: string }) {
  const sessions = new Map<string, FakeSession>();
  const charges = new Map<string, FakeCharge>();
  const refunds = new Map<string, FakeRefund>();
  /** Answers already given to a refund create, by Idempotency-Key (Stripe replays them). */
  const idempotent = new Map<string, FakeRefund>();
  const requests: string[] = [];
  /** Idempotency-Key header of every POST /v1/refunds received, in order (replays included). */
  const refundKeys: string[] = [];
  /** What the next refunds are created with, and whether the Refunds API answers at all (create; list and retrieve). */
  const refundBehaviour = { status: 'succeeded' as FakeRefund['status'], down: false, listDown: false };
  const stripeError = (status: number, message: string, code?: string) =>
    Response.json({ error: { type: status >= 500 ? 'api_error' : 'invalid_request_error', message, ...(code ? { code } : {}) } }, { status });
  const now = () => Math.floor(Date.now() / 1000);
  const chargeOf = (paymentIntent: string) => [...charges.values()].find((c) => c.payment_intent === paymentIntent);
  const list = <T>(data: T[], url: string) => Response.json({ object: 'list', data, has_more: false, url });

  /** A refund on a charge, as Stripe makes it (refusing more than remains). */
  function makeRefund(charge: FakeCharge, amount: number, metadata: Record<string, string>, status = refundBehaviour.status): FakeRefund | Response {
    if (charge.amount_refunded >= charge.amount) return stripeError(400, `Charge ${charge.id} has already been refunded.`, 'charge_already_refunded');
    if (amount <= 0 || amount > charge.amount - charge.amount_refunded)
      return stripeError(400, `Refund amount ($${amount / 100}) is greater than unrefunded amount on charge ($${(charge.amount - charge.amount_refunded) / 100})`, 'amount_too_large');
    const refund: FakeRefund = {
      id: `re_${randomBytes(12).toString('hex')}`,
      object: 'refund',
      amount,
      charge: charge.id,
      currency: charge.currency,
      payment_intent: charge.payment_intent,
      status,
      metadata,
      reason: null,
      created: now(),
    };
    refunds.set(refund.id, refund);
    if (status !== 'failed' && status !== 'canceled') charge.amount_refunded += amount;
    charge.refunded = charge.amount_refunded === charge.amount;
    return refund;
  }

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
      if (req.method === 'GET' && url.pathname === '/v1/checkout/sessions') {
        const intent = url.searchParams.get('payment_intent');
        return list([...sessions.values()].filter((x) => !intent || x.payment_intent === intent), '/v1/checkout/sessions');
      }
      if (url.pathname === '/v1/refunds' && req.method === 'POST') {
        const key = req.headers.get('idempotency-key') ?? '';
        refundKeys.push(key);
        if (refundBehaviour.down) return stripeError(500, 'An unknown error occurred');
        const replayed = idempotent.get(key);
        if (replayed) return Response.json(replayed);
        const form = new URLSearchParams(await req.text());
        const charge = chargeOf(form.get('payment_intent') ?? '') ?? charges.get(form.get('charge') ?? '');
        if (!charge) return stripeError(400, 'No such payment_intent', 'resource_missing');
        const made = makeRefund(charge, Number(form.get('amount') ?? charge.amount - charge.amount_refunded), metadataOf(form));
        if (made instanceof Response) return made;
        if (form.get('reason')) made.reason = form.get('reason');
        if (key) idempotent.set(key, made);
        return Response.json(made);
      }
      if (url.pathname.startsWith('/v1/refunds') && req.method === 'GET' && refundBehaviour.listDown) return stripeError(500, 'An unknown error occurred');
      if (url.pathname === '/v1/refunds' && req.method === 'GET') {
        const intent = url.searchParams.get('payment_intent');
        const charge = url.searchParams.get('charge');
        const found = [...refunds.values()].filter((r) => (!intent || r.payment_intent === intent) && (!charge || r.charge === charge));
        return list(found.reverse(), '/v1/refunds');
      }
      const r = /^\/v1\/refunds\/([^/]+)$/.exec(url.pathname);
      if (r && req.method === 'GET') return refunds.has(r[1]!) ? Response.json(refunds.get(r[1]!)) : stripeError(404, 'No such refund', 'resource_missing');
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

  const sessionFor = (paymentId: string) => [...sessions.values()].find((s) => s.client_reference_id === paymentId)!;
  /** The charge of a paid payment. */
  const chargeFor = (paymentId: string) => chargeOf(sessionFor(paymentId).payment_intent!)!;

  const signer = new Stripe(opts.secretKey);
  async function event(type: string, object: object) {
    const payload = JSON.stringify({ id: `evt_${randomBytes(8).toString('hex')}`, object: 'event', type, data: { object } });
    const header = await signer.webhooks.generateTestHeaderStringAsync({ payload, secret: opts.webhookSecret });
    return { body: payload, headers: { 'content-type': 'application/json', 'stripe-signature': header } };
  }

  return {
    url: `http://127.0.0.1:${server.port}`,
    sessions,
    requests,
    event,
    charges,
    refunds,
    refundKeys,
    refundBehaviour,
    sessionFor,
    chargeFor,
    /** The customer pays: the session completes (a PaymentIntent and its Charge); returns the signed checkout.session.completed event. */
    pay(paymentId: string, amountTotal?: number) {
      const s = [...sessions.values()].find((x) => x.client_reference_id === paymentId)!;
      Object.assign(s, { status: 'complete', payment_status: 'paid', payment_intent: `pi_${randomBytes(8).toString('hex')}` });
      if (amountTotal !== undefined) s.amount_total = amountTotal;
      const charge: FakeCharge = {
        id: `ch_${randomBytes(12).toString('hex')}`,
        object: 'charge',
        amount: s.amount_total,
        amount_refunded: 0,
        currency: s.currency,
        payment_intent: s.payment_intent!,
        refunded: false,
        disputed: false,
        status: 'succeeded',
      };
      charges.set(charge.id, charge);
      return event('checkout.session.completed', s);
    },
    /** A refund made at the Stripe dashboard (no cpd metadata); answers it (or Stripe's refusal). */
    refundAtDashboard(paymentId: string, amount: number, status: FakeRefund['status'] = 'succeeded') {
      const made = makeRefund(chargeFor(paymentId), amount, {}, status);
      if (made instanceof Response) throw new Error('the fake refused the dashboard refund');
      return made;
    },
    /** charge.refunded as Stripe sends it: the charge as it now is (its refunds are not embedded). */
    chargeRefunded(paymentId: string) {
      return event('charge.refunded', { ...chargeFor(paymentId) });
    },
    /** A refund's status changes (a pending refund that fails, for one); answers charge.refund.updated. */
    refundUpdated(refundId: string, status: FakeRefund['status']) {
      const refund = refunds.get(refundId)!;
      const charge = charges.get(refund.charge)!;
      const held = (s: string) => s !== 'failed' && s !== 'canceled';
      if (held(refund.status) && !held(status)) charge.amount_refunded -= refund.amount;
      refund.status = status;
      charge.refunded = charge.amount_refunded === charge.amount;
      return event('charge.refund.updated', { ...refund });
    },
    /** The cardholder disputes the charge: charge.dispute.created (then closed with disputeClosed). */
    dispute(paymentId: string, amount: number, status = 'needs_response') {
      const charge = chargeFor(paymentId);
      charge.disputed = true;
      const dispute: FakeDispute = {
        id: `dp_${randomBytes(12).toString('hex')}`,
        object: 'dispute',
        amount,
        charge: charge.id,
        currency: charge.currency,
        payment_intent: charge.payment_intent,
        reason: 'fraudulent',
        status,
        created: now(),
      };
      return { dispute, created: event('charge.dispute.created', dispute) };
    },
    disputeClosed(dispute: FakeDispute, status: 'won' | 'lost') {
      return event('charge.dispute.closed', { ...dispute, status });
    },
    expireEvent(paymentId: string) {
      const s = [...sessions.values()].find((x) => x.client_reference_id === paymentId)!;
      s.status = 'expired';
      return event('checkout.session.expired', s);
    },
    stop: () => server.stop(true),
  };
}

/**
 * /api/billing/* and /api/payments/*. Handlers are thin; the webhook route reads the raw body
 * (parse: 'none') because provider signatures cover the exact bytes sent.
 */
import { Elysia, t } from 'elysia';
import type { Config } from '../../config';
import type { authPlugin } from '../../platform/http/auth';
import { chooseLanguage } from '../../platform/http/language';
import type { BillingService } from './billing.service';
import * as s from './billing.schemas';

export interface BillingRoutesDeps {
  auth: ReturnType<typeof authPlugin>;
  billing: BillingService;
  config: Config;
  /** Refuses a caller who may not pay yet (accounts: 403 until the email is verified, where that is required). */
  requirePayer?: (userId: string) => Promise<void>;
  /**
   * The wallet a request reads or pays into: the caller's, or (org_id) an organization's, which
   * only its owners and admins may use (orgs: 403 for a member, 404 for anyone else).
   */
  walletOf?: WalletOf;
}

export type WalletOf = (userId: string, orgId: string | undefined) => Promise<string>;
const ownWallet: WalletOf = async (userId) => userId;

/**
 * The wallet a payment's page is read from: the organization's when org_id says so, else the
 * payment's own payer when the caller may see that wallet (an organization's owners and admins
 * follow a checkout's return without org_id), else the caller's (a foreign payment is then 404).
 */
async function paymentWallet(billing: BillingService, walletOf: WalletOf, userId: string, paymentId: string, orgId: string | undefined): Promise<string> {
  if (orgId) return walletOf(userId, orgId);
  const payer = await billing.payments.payerOf(paymentId);
  if (payer === null || payer === userId || walletOf === ownWallet) return userId;
  return walletOf(userId, payer).catch(() => userId);
}

/**
 * Bodies here are what a payment provider sends (its content type, its signature over the exact
 * bytes), or the sandbox checkout's own form buttons: not held to the API's JSON-only rule.
 */
export const PROVIDER_BODY_PATHS = ['/api/payments/webhooks/', '/api/payments/sandbox/'] as const;

const html = (body: string, contentType = 'text/html; charset=utf-8') => new Response(body, { headers: { 'content-type': contentType } });

/** Invoices exist on the China site only and receipts on the international site only: elsewhere their paths are unknown routes (404). */
const invoiceRoutes = (auth: BillingRoutesDeps['auth'], billing: BillingService, walletOf: WalletOf) =>
  new Elysia({ name: 'cpd/billing/invoices', detail: { tags: ['billing'] } })
    .use(auth)
    .get('/api/billing/invoices', async ({ caller, query }) => billing.invoices.listInvoices(await walletOf(caller.userId, query.org_id)), {
      auth: ['session'],
      query: s.WalletQuery,
      detail: { summary: 'Invoices (China site)' },
    })
    .post(
      '/api/billing/invoices',
      async ({ caller, body, set }) => {
        const { org_id, ...input } = body;
        const invoice = await billing.invoices.createInvoice(await walletOf(caller.userId, org_id), input);
        set.status = 201;
        return invoice;
      },
      { auth: ['session'], body: s.CreateInvoiceBody, detail: { summary: 'Issue an invoice for a paid payment (China site)' } },
    )
    .get('/api/billing/invoices/:paymentId/download', async ({ caller, params, query }) => billing.invoices.downloadInvoice(await paymentWallet(billing, walletOf, caller.userId, params.paymentId, query.org_id), params.paymentId), {
      auth: ['session', 'query'],
      params: s.PaymentIdParams,
      query: s.WalletQuery,
      detail: { summary: 'Invoice as HTML (China site)' },
    });

const receiptRoutes = (auth: BillingRoutesDeps['auth'], billing: BillingService, walletOf: WalletOf) =>
  new Elysia({ name: 'cpd/billing/receipts', detail: { tags: ['billing'] } })
    .use(auth)
    .get(
      '/api/billing/receipts/:paymentId/download',
      async ({ caller, params, query }) =>
        billing.invoices.downloadReceipt({ userId: await paymentWallet(billing, walletOf, caller.userId, params.paymentId, query.org_id), email: caller.email }, params.paymentId),
      {
        auth: ['session', 'query'],
        params: s.PaymentIdParams,
        query: s.WalletQuery,
        detail: { summary: 'Card receipt as HTML (international site)' },
      },
    );

export const billingRoutes = ({ auth, billing, config, requirePayer, walletOf = ownWallet }: BillingRoutesDeps) => {
  const { ledger, payments, notifications, sandbox } = billing;
  const app = new Elysia({ name: 'cpd/billing', detail: { tags: ['billing'] } })
    .use(auth)
    .get('/api/billing/wallet', async ({ caller, query }) => ledger.wallet(await walletOf(caller.userId, query.org_id)), {
      auth: ['session'],
      query: s.WalletQuery,
      detail: { summary: "Wallet balance (yours, or an organization's with org_id)" },
    })
    .get('/api/billing/transactions', async ({ caller, query }) => ledger.listTransactions(await walletOf(caller.userId, query.org_id), { limit: query.limit ?? 50, cursor: query.cursor }), {
      auth: ['session'],
      query: s.ListQuery,
      detail: { summary: 'Ledger, newest first' },
    })
    .get('/api/billing/summary', async ({ caller, query }) => ledger.summary(await walletOf(caller.userId, query.org_id)), {
      auth: ['session'],
      query: s.WalletQuery,
      detail: { summary: 'Balance and totals' },
    })
    .post(
      '/api/billing/payments',
      async ({ caller, body, headers, set }) => {
        const { org_id, ...input } = body;
        const wallet = await walletOf(caller.userId, org_id);
        await requirePayer?.(caller.userId);
        set.status = 201;
        return payments.create(wallet, input, headers['idempotency-key']);
      },
      { auth: ['session'], body: s.CreatePaymentBody, headers: s.IdempotencyHeaders, detail: { summary: "Start a top-up (of an organization's wallet with org_id)" } },
    )
    .get('/api/billing/payments', async ({ caller, query }) => {
      const { org_id, ...rest } = query;
      return payments.list(await walletOf(caller.userId, org_id), { ...rest, limit: rest.limit ?? 50 });
    }, {
      auth: ['session'],
      query: s.PaymentListQuery,
      response: { 200: s.PaymentList },
      detail: { summary: 'Top-ups, newest first' },
    })
    .get('/api/billing/payments/:id', async ({ caller, params, query }) => payments.get(await paymentWallet(billing, walletOf, caller.userId, params.id, query.org_id), params.id), {
      auth: ['session'],
      params: s.IdParams,
      query: s.WalletQuery,
      response: { 200: s.PaymentDetail },
      detail: { summary: 'One top-up (polling reconciles it with the provider)' },
    })
    .get('/api/payments/providers', () => payments.providerList(), { detail: { summary: 'Enabled payment providers' } })
    .post('/api/payments/webhooks/:provider', async ({ params, request }) => notifications.handle(params.provider, await request.text(), request.headers), {
      parse: 'none',
      params: s.ProviderParams,
      detail: { summary: 'Provider notifications (signature checked on the raw body)' },
    })
    .use(config.site === 'cn' ? invoiceRoutes(auth, billing, walletOf) : receiptRoutes(auth, billing, walletOf));
  if (!sandbox) return app;
  // The sandbox provider's own pages: no credential, they stand for the provider's checkout.
  return app
    .get(
      '/api/payments/sandbox/:id',
      async ({ params, request }) =>
        html(await sandbox.page(params.id, chooseLanguage(config.site, request.headers.get('cookie'), request.headers.get('accept-language')))),
      { params: s.IdParams, detail: { summary: 'Sandbox checkout page' } },
    )
    .get('/api/payments/sandbox/:id/qr.svg', async ({ params }) => html(await sandbox.qrSvg(params.id), 'image/svg+xml'), {
      params: s.IdParams,
      detail: { summary: 'Sandbox checkout QR code' },
    })
    .post(
      '/api/payments/sandbox/:id/:decision',
      async ({ params, redirect }) => {
        await sandbox.decide(params.id, params.decision === 'pay' ? 'paid' : 'failed');
        return redirect(`/api/payments/sandbox/${params.id}`, 303);
      },
      { params: t.Object({ id: t.String(), decision: t.UnionEnum(['pay', 'fail']) }), detail: { summary: 'Sandbox Pay / Fail buttons' } },
    );
};

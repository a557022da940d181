/** /api/admin/users, /api/admin/orgs, /api/admin/payments, /api/admin/audit: admin sessions only (403 for others, 401 without). */
import { Elysia } from 'elysia';
import type { authPlugin, Caller } from '../../platform/http/auth';
import type { AdminService } from './admin.service';
import * as s from './admin.schemas';

const actorOf = (caller: Caller) => ({ userId: caller.userId, email: caller.email });

export const adminRoutes = ({ auth, admin }: { auth: ReturnType<typeof authPlugin>; admin: AdminService }) =>
  new Elysia({ name: 'cpd/admin', detail: { tags: ['admin'] } })
    .use(auth)
    .get('/api/admin/users', ({ query }) => admin.listUsers({ ...query, limit: query.limit ?? 50 }), {
      auth: ['admin'],
      query: s.UserListQuery,
      response: { 200: s.AdminUserList },
      detail: { summary: 'Accounts, newest first; q matches email or phone' },
    })
    .get('/api/admin/users/:id', ({ params }) => admin.getUser(params.id), {
      auth: ['admin'],
      params: s.IdParams,
      response: { 200: s.AdminUserDetail },
      detail: { summary: 'One account with its sessions, keys and last sign-in' },
    })
    .patch('/api/admin/users/:id', ({ caller, params, body }) => admin.updateUser(actorOf(caller), params.id, body), {
      auth: ['admin'],
      params: s.IdParams,
      body: s.UserPatchBody,
      response: { 200: s.AdminUserDetail },
      detail: { summary: 'Disable (ends sessions, refuses keys on every replica) or promote an account' },
    })
    .post(
      '/api/admin/users/:id/password',
      async ({ caller, params, body, set }) => {
        await admin.setPassword(actorOf(caller), params.id, body.password);
        set.status = 204;
      },
      { auth: ['admin'], params: s.IdParams, body: s.PasswordBody, detail: { summary: "Set an account's password (ends its sessions)" } },
    )
    .post(
      '/api/admin/users/:id/adjustments',
      async ({ caller, params, body, headers, set }) => {
        set.status = 201;
        return admin.adjust(actorOf(caller), params.id, body, headers['idempotency-key']);
      },
      {
        auth: ['admin'],
        params: s.IdParams,
        body: s.AdjustmentBody,
        headers: s.IdempotencyHeaders,
        response: { 201: s.Transaction },
        detail: { summary: 'A signed wallet adjustment with a reason (Idempotency-Key)' },
      },
    )
    .get('/api/admin/orgs', ({ query }) => admin.listOrgs({ ...query, limit: query.limit ?? 50 }), {
      auth: ['admin'],
      query: s.OrgListQuery,
      response: { 200: s.AdminOrgList },
      detail: { summary: 'Organizations with their balances, newest first; q matches the name or id' },
    })
    .get('/api/admin/orgs/:id', ({ params }) => admin.getOrg(params.id), {
      auth: ['admin'],
      params: s.IdParams,
      response: { 200: s.AdminOrgDetail },
      detail: { summary: 'One organization with its balance and members' },
    })
    .get('/api/admin/orgs/:id/transactions', ({ params, query }) => admin.orgTransactions(params.id, { ...query, limit: query.limit ?? 50 }), {
      auth: ['admin'],
      params: s.IdParams,
      query: s.TransactionListQuery,
      response: { 200: s.TransactionList },
      detail: { summary: "An organization's ledger, newest first" },
    })
    .post(
      '/api/admin/orgs/:id/adjustments',
      async ({ caller, params, body, headers, set }) => {
        set.status = 201;
        return admin.adjustOrg(actorOf(caller), params.id, body, headers['idempotency-key']);
      },
      {
        auth: ['admin'],
        params: s.IdParams,
        body: s.AdjustmentBody,
        headers: s.IdempotencyHeaders,
        response: { 201: s.Transaction },
        detail: { summary: "A signed adjustment of an organization's wallet with a reason (Idempotency-Key)" },
      },
    )
    .get('/api/admin/payments', ({ query }) => admin.listPayments({ ...query, limit: query.limit ?? 50 }), {
      auth: ['admin'],
      query: s.PaymentListQuery,
      response: { 200: s.AdminPaymentList },
      detail: { summary: "Every account's top-ups, newest first" },
    })
    .post('/api/admin/payments/:id/reconcile', ({ caller, params }) => admin.reconcilePayment(actorOf(caller), params.id), {
      auth: ['admin'],
      params: s.IdParams,
      response: { 200: s.AdminPayment },
      detail: { summary: 'Ask the provider about a payment now and settle it (credits once if paid)' },
    })
    .post(
      '/api/admin/payments/:id/refund',
      ({ caller, params, body, headers }) => admin.refundPayment(actorOf(caller), params.id, body, headers['idempotency-key']),
      {
        auth: ['admin'],
        params: s.IdParams,
        body: s.RefundBody,
        headers: s.IdempotencyHeaders,
        response: { 200: s.AdminPaymentAnswer },
        detail: { summary: 'Refund a paid payment through its provider (Idempotency-Key); the wallet is debited by the amount' },
      },
    )
    .get('/api/admin/audit', ({ query }) => admin.listAudit({ ...query, limit: query.limit ?? 50 }), {
      auth: ['admin'],
      query: s.AuditQuery,
      response: { 200: s.AuditList },
      detail: { summary: 'Every admin write, newest first' },
    });

/** Request and response schemas of /api/admin/users, /orgs, /payments and /audit. */
import { t } from 'elysia';

const limit = t.Optional(t.Integer({ minimum: 1, maximum: 200, default: 50 }));
const cursor = t.Optional(t.String({ minLength: 1 }));

export const UserListQuery = t.Object({ q: t.Optional(t.String({ maxLength: 128, description: 'part of an email or phone number' })), limit, cursor });
export const AuditQuery = t.Object({ limit, cursor });
export const PaymentListQuery = t.Object({
  limit,
  cursor,
  // Patterns, not UnionEnum: Elysia fills an absent optional enum with its first member.
  status: t.Optional(t.String({ pattern: '^(pending|paid|failed|expired)$' })),
  provider: t.Optional(t.String({ pattern: '^(card|chat_wallet|app_wallet)$' })),
  user_id: t.Optional(t.String({ minLength: 1, maxLength: 64 })),
});

export const IdParams = t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) });

export const UserPatchBody = t.Object(
  { disabled: t.Optional(t.Boolean()), is_admin: t.Optional(t.Boolean()), price_group: t.Optional(t.String({ minLength: 1, maxLength: 64 })) },
  { additionalProperties: false },
);
export const PasswordBody = t.Object({ password: t.String({ minLength: 8, maxLength: 128 }) });
export const AdjustmentBody = t.Object({
  amount: t.Number({ description: 'signed, major units, at most 6 decimals, not zero' }),
  reason: t.String({ minLength: 1, maxLength: 500 }),
  allow_negative: t.Optional(t.Boolean()),
});
export const RefundBody = t.Object({
  amount: t.Optional(t.Number({ exclusiveMinimum: 0, description: 'major units, at most 6 decimals (whole cents with a live provider); absent: what remains unrefunded' })),
  reason: t.String({ minLength: 1, maxLength: 500 }),
  allow_negative: t.Optional(t.Boolean({ description: "allow the refund to take the wallet's balance below zero (money already spent)" })),
});
export const IdempotencyHeaders = t.Object({ 'idempotency-key': t.Optional(t.String({ minLength: 1, maxLength: 255 })) });

const AdminUser = {
  id: t.String(),
  email: t.Union([t.String(), t.Null()]),
  phone: t.Union([t.String(), t.Null()]),
  is_admin: t.Boolean(),
  disabled: t.Boolean(),
  created_at: t.String(),
  balance: t.Number(),
  currency: t.String(),
  price_group: t.String(),
};
export const AdminUserList = t.Object({ users: t.Array(t.Object(AdminUser)), next_cursor: t.Union([t.String(), t.Null()]) });
export const AdminUserDetail = t.Object({
  ...AdminUser,
  sessions_count: t.Integer(),
  keys_count: t.Integer(),
  last_login_at: t.Union([t.String(), t.Null()]),
});

export const Transaction = t.Object({
  transaction: t.Object({ id: t.String(), type: t.String(), amount: t.Number(), currency: t.String(), created_at: t.String(), description: t.String() }),
});

const AdminPayment = t.Object({
  id: t.String(),
  user_id: t.String(),
  email: t.Union([t.String(), t.Null()]),
  provider: t.String(),
  amount: t.Number(),
  currency: t.String(),
  status: t.String(),
  created_at: t.String(),
  paid_at: t.Union([t.String(), t.Null()]),
  provider_ref: t.Union([t.String(), t.Null()]),
  failure: t.Union([t.String(), t.Null()]),
  refunded_amount: t.Number({ description: 'what refunds and disputes hold back of the payment (it stays paid)' }),
  refunds: t.Array(
    t.Object({
      id: t.String(),
      kind: t.String({ description: 'refund | dispute' }),
      source: t.String({ description: 'admin (asked for through cpd) | provider (started at the provider)' }),
      amount: t.Number(),
      status: t.String({ description: 'refunds: pending, succeeded, failed; disputes: open, won, lost' }),
      reason: t.Union([t.String(), t.Null()]),
      provider_refund_id: t.Union([t.String(), t.Null()]),
      created_at: t.String(),
    }),
  ),
});
export const AdminPaymentList = t.Object({ payments: t.Array(AdminPayment), next_cursor: t.Union([t.String(), t.Null()]) });
export { AdminPayment };
export const AdminPaymentAnswer = t.Object({ payment: AdminPayment });

export const AuditList = t.Object({
  entries: t.Array(
    t.Object({
      id: t.String(),
      actor_id: t.Union([t.String(), t.Null()]),
      actor_email: t.Union([t.String(), t.Null()]),
      action: t.String(),
      target: t.String(),
      details: t.Record(t.String(), t.Unknown()),
      created_at: t.String(),
    }),
  ),
  next_cursor: t.Union([t.String(), t.Null()]),
});

export const OrgListQuery = t.Object({ q: t.Optional(t.String({ maxLength: 128, description: "part of an organization's name or id" })), limit, cursor });
export const TransactionListQuery = t.Object({ limit, cursor });

const AdminOrgFields = {
  id: t.String(),
  name: t.String(),
  currency: t.String(),
  balance: t.Number(),
  member_count: t.Integer(),
  created_at: t.String(),
};
export const AdminOrgList = t.Object({ orgs: t.Array(t.Object(AdminOrgFields)), next_cursor: t.Union([t.String(), t.Null()]) });
export const AdminOrgDetail = t.Object({
  ...AdminOrgFields,
  members: t.Array(t.Object({ user_id: t.String(), email: t.Union([t.String(), t.Null()]), role: t.String(), joined_at: t.String() })),
});
export const TransactionList = t.Object({ transactions: t.Array(Transaction.properties.transaction), next_cursor: t.Union([t.String(), t.Null()]) });

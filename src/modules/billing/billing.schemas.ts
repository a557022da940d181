import { t } from 'elysia';

const orgId = t.Optional(t.String({ minLength: 1, maxLength: 64, description: "an organization's wallet instead of your own (its owners and admins)" }));
/** Whose wallet: the caller's, or an organization's. */
export const WalletQuery = t.Object({ org_id: orgId });

/** Every cursor list: limit 1..200 (default 50, outside 400); an opaque cursor. */
export const ListQuery = t.Object({
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 200, default: 50 })),
  cursor: t.Optional(t.String({ minLength: 1 })),
  org_id: orgId,
});

export const PaymentListQuery = t.Object({
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 200, default: 50 })),
  cursor: t.Optional(t.String({ minLength: 1 })),
  org_id: orgId,
  // A pattern, not UnionEnum: Elysia fills an absent optional enum with its first member.
  status: t.Optional(t.String({ pattern: '^(pending|paid|failed|expired)$' })),
});

export const CreatePaymentBody = t.Object({
  provider: t.String({ minLength: 1 }),
  amount: t.Number({ exclusiveMinimum: 0 }),
  currency: t.String({ minLength: 1 }),
  org_id: orgId,
});

export const IdempotencyHeaders = t.Object({ 'idempotency-key': t.Optional(t.String({ minLength: 1, maxLength: 255 })) });

export const CreateInvoiceBody = t.Object({
  payment_id: t.String({ minLength: 1 }),
  title: t.String({ minLength: 1, maxLength: 200 }),
  tax_id: t.Optional(t.String({ maxLength: 32 })),
  org_id: orgId,
});

export const IdParams = t.Object({ id: t.String() });
export const PaymentIdParams = t.Object({ paymentId: t.String() });
export const ProviderParams = t.Object({ provider: t.String() });

/** A top-up as the list shows it; refunded_amount is what refunds and disputes hold back (the status stays paid). */
const PaymentFields = {
  id: t.String(),
  provider: t.String(),
  amount: t.Number(),
  currency: t.String(),
  status: t.String({ description: 'pending, paid, failed, expired' }),
  created_at: t.String(),
  refunded_amount: t.Number({ description: 'what refunds and disputes hold back of the payment; a refunded payment stays paid' }),
  paid_at: t.Union([t.String(), t.Null()]),
};
export const PaymentList = t.Object({ payments: t.Array(t.Object(PaymentFields)), next_cursor: t.Union([t.String(), t.Null()]) });
export const PaymentDetail = t.Object({ ...PaymentFields, expires_at: t.String(), provider_reference: t.Union([t.String(), t.Null()]) });

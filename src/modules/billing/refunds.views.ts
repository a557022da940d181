/**
 * The refunds and disputes of payments in the API's shape, for the operators' payment views. Apart
 * from refunds.service.ts, which needs the payments' service: the payments' views need only this.
 */
import { asc, inArray } from 'drizzle-orm';
import type { DbOrTx } from '../../platform/db';
import { paymentRefunds } from './billing.tables';
import { toMajor } from './money';

type PaymentRefund = typeof paymentRefunds.$inferSelect;

export type RefundView = ReturnType<typeof refundView>;

/** The refunds and disputes of these payments, oldest first, in the API's shape (operators' payment views). */
export async function refundViewsOf(db: DbOrTx, paymentIds: string[]): Promise<Map<string, RefundView[]>> {
  const byPayment = new Map<string, RefundView[]>();
  if (!paymentIds.length) return byPayment;
  const rows = await db
    .select()
    .from(paymentRefunds)
    .where(inArray(paymentRefunds.paymentId, paymentIds))
    .orderBy(asc(paymentRefunds.createdAt), asc(paymentRefunds.id));
  for (const r of rows) byPayment.set(r.paymentId, [...(byPayment.get(r.paymentId) ?? []), refundView(r)]);
  return byPayment;
}

function refundView(r: PaymentRefund) {
  return {
    id: r.id,
    kind: r.kind,
    source: r.source,
    amount: toMajor(r.amountMicros),
    status: r.status,
    reason: r.reason,
    provider_refund_id: r.providerRefundId,
    created_at: r.createdAt.toISOString(),
  };
}

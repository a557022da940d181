/**
 * Money events other modules react to (the accounts module mails the account): a payment became
 * paid, a refund succeeded. Emitted after the transaction that made them committed, in the
 * process that committed it; a listener's failure is logged and never reaches the payment path.
 */
import type { DbOrTx } from '../../platform/db';
import type { Logger } from '../../platform/logger';

export type MoneyEvent =
  | { kind: 'payment_paid'; userId: string; paymentId: string; amountMicros: bigint; currency: string }
  | { kind: 'refund_succeeded'; userId: string; paymentId: string; refundId: string; amountMicros: bigint; currency: string };

export function createMoneyEvents(log: Logger) {
  const listeners = new Set<(event: MoneyEvent) => void>();
  return {
    emit(event: MoneyEvent) {
      for (const listener of listeners) {
        try {
          listener(event);
        } catch (err) {
          log.error({ err, event: event.kind }, 'money event listener failed');
        }
      }
    },
    subscribe(listener: (event: MoneyEvent) => void) {
      listeners.add(listener);
    },
  };
}

export type MoneyEvents = ReturnType<typeof createMoneyEvents>;

/**
 * Where billing records a money change of a wallet in the audit log (the orgs module records those
 * of an organization's wallet), in the transaction that moved the money: it commits or rolls back
 * with it. `actorId`: the account that asked for it; null when no person did (a provider's notice).
 */
export interface MoneyAudit {
  record(on: DbOrTx, change: { walletId: string; action: MoneyAuditAction; actorId: string | null; details: Record<string, unknown> }): Promise<void>;
}

export type MoneyAuditAction = 'payment.paid' | 'payment.refund' | 'payment.refund_reversed' | 'invoice.issue';

export const NO_MONEY_AUDIT: MoneyAudit = { record: async () => {} };

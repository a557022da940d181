/**
 * Money events other modules react to (the accounts module mails the account): a payment became
 * paid, a refund succeeded. Emitted after the transaction that made them committed, in the
 * process that committed it; a listener's failure is logged and never reaches the payment path.
 */
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

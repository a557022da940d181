/**
 * Billing's money changes of an organization's wallet (a top-up paid, a refund or its reversal, an
 * invoice issued) as entries of the organization's audit log, written in the transaction that moved
 * the money. Wallets of users are not organizations' and are left alone. Made before billing (it
 * needs only the audit log and members' emails), so the composition root can hand it to billing.
 */
import type { AccountsService } from '../accounts';
import type { AuditService } from '../audit';
import type { MoneyAudit } from '../billing';
import { isOrgId } from './orgs.ids';

export function createOrgMoneyAudit(deps: { audit: AuditService; emailsOf: AccountsService['emailsOf'] }): MoneyAudit {
  return {
    async record(on, change) {
      if (!isOrgId(change.walletId)) return;
      const actor = change.actorId === null ? ('system' as const) : { userId: change.actorId, email: (await deps.emailsOf([change.actorId], on)).get(change.actorId) ?? null };
      await deps.audit.record({ actor, action: `org.${change.action}`, target: change.walletId, details: change.details }, on);
    },
  };
}

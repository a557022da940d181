/**
 * What the accounts module asks of organizations (the orgs module implements it; the composition
 * root wires it with `accounts.useOrgs`): an organization's key is accepted only while its
 * creator is a member, and carries the member's cap of the organization's spend.
 */
import type { DbOrTx } from '../../platform/db';
import type { SpendPeriod } from '../metering';

export type OrgRole = 'owner' | 'admin' | 'member';

export interface OrgMember {
  role: OrgRole;
  spendLimitMicros: bigint | null;
  spendPeriod: SpendPeriod | null;
}

export interface OrgMembership {
  /** The user's membership of a live organization of this site; null: not a member, or no such organization. */
  memberOf(orgId: string, userId: string): Promise<OrgMember | null>;
  /** Records a key made or revoked in the organization's audit log, in the change's transaction. */
  keyChanged(on: DbOrTx, change: { orgId: string; actor: { userId: string; email: string | null }; action: 'org.key.create' | 'org.key.revoke'; keyId: string; name: string; createdBy: string }): Promise<void>;
}

/** Before organizations are wired (the CLI, some tests): no one is a member of anything. */
export const NO_ORGS: OrgMembership = { memberOf: async () => null, keyChanged: async () => {} };

/** Who hears of an organization's money, and when its balance is low (the orgs module's directory implements it). */
export interface OrgManagers {
  /** Its name and its owners and admins (null: no such organization). */
  managers(orgId: string): Promise<{ name: string; userIds: string[] } | null>;
  /** The organizations among `ids` with a low-balance threshold, and whether the current crossing was mailed. */
  lowBalanceWatch(ids: string[]): Promise<Array<{ id: string; thresholdMicros: bigint; notified: boolean }>>;
  /** Marks (or clears) the crossing while the threshold is still `thresholdMicros`; true when this call changed it (of replicas, one wins). */
  markLowBalance(orgId: string, thresholdMicros: bigint, notified: boolean): Promise<boolean>;
}

export const NO_ORG_MANAGERS: OrgManagers = { managers: async () => null, lowBalanceWatch: async () => [], markLowBalance: async () => false };

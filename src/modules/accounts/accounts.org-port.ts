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

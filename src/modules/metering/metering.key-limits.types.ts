/**
 * An API key's optional limits, one definition for the accounts module (the key record and its
 * API) and for the router's admission (metering.key-limits.ts enforces them).
 */
export type SpendPeriod = 'day' | 'month' | 'total';

export interface KeyLimits {
  models: string[] | null;
  spendLimitMicros: bigint | null;
  spendPeriod: SpendPeriod | null;
  expiresAt: Date | null;
  rpm: number | null;
  /** An organization's key: its member's share of the organization's spend (absent: a personal key). */
  member?: MemberBudget | null;
}

/**
 * What a member of an organization may spend of its wallet, over all of the member's keys of it.
 * Its spend is rolled up under `id` beside the keys' own (router_usage_key_daily), so the key spend
 * limits' machinery bounds it the same way across replicas.
 */
export interface MemberBudget {
  /** `member:<org id>:<user id>` */
  id: string;
  limitMicros: bigint | null;
  period: SpendPeriod | null;
}

export const memberBudgetId = (orgId: string, userId: string) => `member:${orgId}:${userId}`;

/** The request fields (absent: unchanged; null: cleared). */
export interface KeyLimitsInput {
  models?: string[] | null;
  spend_limit?: number | null;
  spend_period?: SpendPeriod | null;
  expires_at?: string | null;
  rpm?: number | null;
}

/** What the limits need from other modules, given by the composition root. */
export interface KeyPolicy {
  /** A priced model slug, or a route with a priced model. */
  isModel(name: string): boolean;
  /** Spent by each key in its current period (site currency micro-units). */
  spentBy(keys: Array<{ keyId: string; period: SpendPeriod }>): Promise<Map<string, bigint>>;
}

export const NO_LIMITS: KeyLimits = { models: null, spendLimitMicros: null, spendPeriod: null, expiresAt: null, rpm: null };

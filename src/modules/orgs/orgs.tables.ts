import { bigint, index, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

/**
 * An organization: a wallet of the site's currency (billing keys it by the organization's id, as it
 * keys a personal wallet by the user's) and its members. Deleting one keeps the row (deleted_at):
 * its ledger, payments and usage still name it.
 */
export const organizations = pgTable(
  'organizations',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    /** The site that made it: an organization lives on one site, like an API key. */
    site: text('site').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    deletedAt: timestamp('deleted_at', { withTimezone: true, mode: 'date' }),
  },
);

/** One row per member: owner | admin | member, with an optional cap on what the member's keys spend. */
export const orgMembers = pgTable(
  'org_members',
  {
    orgId: text('org_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    userId: text('user_id').notNull(),
    role: text('role').notNull(),
    /** What the member's keys may spend of the organization's wallet per period (micros); null: no cap. */
    spendLimitMicros: bigint('spend_limit_micros', { mode: 'bigint' }),
    /** day | month | total; set exactly when spend_limit_micros is. */
    spendPeriod: text('spend_period'),
    joinedAt: timestamp('joined_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.userId] }), index('org_members_user_idx').on(t.userId)],
);

/** An invitation mailed to an address: its token stored as SHA-256, used once, for 7 days. */
export const orgInvites = pgTable(
  'org_invites',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id')
      .notNull()
      .references(() => organizations.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    role: text('role').notNull(),
    tokenHash: text('token_hash').notNull(),
    invitedBy: text('invited_by').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    acceptedAt: timestamp('accepted_at', { withTimezone: true, mode: 'date' }),
    acceptedBy: text('accepted_by'),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [uniqueIndex('org_invites_token_hash_key').on(t.tokenHash), index('org_invites_org_idx').on(t.orgId, t.createdAt)],
);

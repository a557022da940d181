import { sql } from 'drizzle-orm';
import { bigint, boolean, index, integer, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const users = pgTable(
  'users',
  {
    id: text('id').primaryKey(),
    /** null: an account made by a phone code that never gave an email. */
    email: text('email'),
    phone: text('phone'),
    /** null: an account made by OAuth or a phone code that never set a password. */
    passwordHash: text('password_hash'),
    /** When the owner proved the address (a link mailed to it, or a provider that vouched for it). */
    emailVerifiedAt: timestamp('email_verified_at', { withTimezone: true, mode: 'date' }),
    /** The language of mails and SMS to this account ('en' | 'zh-CN'); null: the site's default. */
    locale: text('locale'),
    /** Mail when the wallet falls below this (in the site's currency, micros); null: off. */
    lowBalanceMicros: bigint('low_balance_micros', { mode: 'bigint' }),
    /** Set when the low-balance mail went out; cleared when the balance is above the threshold again (one mail per crossing). */
    lowBalanceNotifiedAt: timestamp('low_balance_notified_at', { withTimezone: true, mode: 'date' }),
    isAdmin: boolean('is_admin').notNull().default(false),
    /** Base32 TOTP secret once 2FA is enabled (RFC 6238 needs the secret itself, so it is not hashable). */
    totpSecret: text('totp_secret'),
    /** Secret offered by 2FA setup, waiting for a first valid code to become totp_secret. */
    totpPendingSecret: text('totp_pending_secret'),
    /** Last accepted TOTP time step: a code is never accepted twice. */
    totpLastStep: bigint('totp_last_step', { mode: 'number' }),
    /** A disabled account has no sessions, its keys are refused and it cannot sign in. */
    disabled: boolean('disabled').notNull().default(false),
    lastLoginAt: timestamp('last_login_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  // created_at, id: the admin list's keyset order.
  (t) => [uniqueIndex('users_email_key').on(sql`lower(${t.email})`), uniqueIndex('users_phone_key').on(t.phone), index('users_created_idx').on(t.createdAt, t.id)],
);

export const sessions = pgTable(
  'sessions',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    tokenHash: text('token_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    userAgent: text('user_agent'),
    ip: text('ip'),
  },
  (t) => [uniqueIndex('sessions_token_hash_key').on(t.tokenHash), index('sessions_user_idx').on(t.userId)],
);

export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    site: text('site').notNull(),
    name: text('name').notNull(),
    prefix: text('prefix').notNull(),
    keyHash: text('key_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true, mode: 'date' }),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
    /** Limits (all optional): allowed model slugs or route names, a spend limit per period, expiry, requests per minute. */
    models: text('models').array(),
    spendLimitMicros: bigint('spend_limit_micros', { mode: 'bigint' }),
    /** day | month | total; set exactly when spend_limit_micros is. */
    spendPeriod: text('spend_period'),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    rpm: integer('rpm'),
    /** The key's requests are captured (docs/captures.md). */
    capture: boolean('capture').notNull().default(false),
    /**
     * An organization's key: the organization's wallet pays for it and user_id is the member who
     * made it (its creator). null: a personal key, paid by user_id's own wallet.
     */
    orgId: text('org_id'),
  },
  (t) => [uniqueIndex('api_keys_key_hash_key').on(t.keyHash), index('api_keys_user_idx').on(t.userId), index('api_keys_org_idx').on(t.orgId)],
);

/** One-time 2FA recovery codes, stored as SHA-256; used_at marks a spent one. */
export const recoveryCodes = pgTable(
  'recovery_codes',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    codeHash: text('code_hash').notNull(),
    usedAt: timestamp('used_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('recovery_codes_user_idx').on(t.userId)],
);

/** A password-verified login waiting for its second factor (it lives 5 minutes and allows 5 wrong codes). */
export const loginChallenges = pgTable(
  'login_challenges',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    tokenHash: text('token_hash').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    failedAttempts: integer('failed_attempts').notNull().default(0),
  },
  (t) => [uniqueIndex('login_challenges_token_hash_key').on(t.tokenHash)],
);

/** Single-use links mailed to an account (verify an email, reset a password): stored as SHA-256, used once. */
export const accountTokens = pgTable(
  'account_tokens',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    /** verify_email | reset_password */
    purpose: text('purpose').notNull(),
    tokenHash: text('token_hash').notNull(),
    /** The address the link went to (a verification proves this address, not a later one). */
    email: text('email').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    usedAt: timestamp('used_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [uniqueIndex('account_tokens_token_hash_key').on(t.tokenHash), index('account_tokens_user_idx').on(t.userId, t.purpose)],
);

/** A sign-in at an OAuth/OpenID provider linked to an account: matched by (provider, subject). */
export const userIdentities = pgTable(
  'user_identities',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    /** github | google | oidc */
    provider: text('provider').notNull(),
    /** The provider's stable user id (GitHub's numeric id, the OpenID `sub`). */
    subject: text('subject').notNull(),
    email: text('email'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('user_identities_provider_subject_key').on(t.provider, t.subject), index('user_identities_user_idx').on(t.userId)],
);

/**
 * An OAuth authorization in flight: the state's hash, the PKCE verifier and the OpenID nonce, kept
 * in the database so the callback may reach any replica; deleting the row is the claim, so a
 * replayed callback finds nothing.
 */
export const oauthStates = pgTable(
  'oauth_states',
  {
    id: text('id').primaryKey(),
    stateHash: text('state_hash').notNull(),
    provider: text('provider').notNull(),
    codeVerifier: text('code_verifier').notNull(),
    nonce: text('nonce'),
    /** Set when a signed-in user links a provider; null for a sign-in. */
    linkUserId: text('link_user_id').references(() => users.id, { onDelete: 'cascade' }),
    /** The browser that started it: the callback must come with the same cookie (login CSRF). */
    browserHash: text('browser_hash').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [uniqueIndex('oauth_states_state_hash_key').on(t.stateHash)],
);

/** A code sent by SMS: stored as SHA-256 keyed by the phone, valid 5 minutes and 5 tries. */
export const phoneCodes = pgTable(
  'phone_codes',
  {
    id: text('id').primaryKey(),
    phone: text('phone').notNull(),
    /** login | register | reset */
    purpose: text('purpose').notNull(),
    codeHash: text('code_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    failedAttempts: integer('failed_attempts').notNull().default(0),
    usedAt: timestamp('used_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('phone_codes_phone_idx').on(t.phone, t.createdAt)],
);

/**
 * Messages sent on a stranger's request (mails, SMS), one row per send and subject (a phone, an
 * email, a client address): counted inside a lock on the subject, these throttles hold exactly
 * across replicas, where the in-memory limiters only hold on average.
 */
export const sendLog = pgTable(
  'send_log',
  {
    id: text('id').primaryKey(),
    /** What was sent: sms | forgot_password | verify_email | … */
    kind: text('kind').notNull(),
    /** `phone:+86…`, `email:a@b`, `ip:1.2.3.4` */
    subject: text('subject').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('send_log_subject_idx').on(t.kind, t.subject, t.createdAt)],
);

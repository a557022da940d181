/**
 * Sign-in and linking with OAuth/OpenID providers (docs/accounts/oauth.md).
 *
 * A start stores the state's hash with the PKCE verifier and the nonce in oauth_states (the
 * callback may reach another replica) and binds it to the browser: the row keeps the hash of a
 * short-lived cookie, and a callback without that cookie is refused (login CSRF: nobody can make
 * a victim's browser finish a sign-in the attacker started). The callback deletes the row first:
 * the delete is the claim, so a replayed or forged callback finds nothing.
 *
 * An account is found by (provider, subject), then by an email the provider verified; otherwise
 * one is made without a password. An email the provider did not verify is never matched: when an
 * account already holds it the sign-in is refused (409), else the new account keeps it unverified.
 */
import { randomPKCECodeVerifier } from 'openid-client';
import { and, eq, gt, lte, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { randomBytes, sha256Hex } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { callbackUrl, createProviders, PROVIDER_IDS, type ProviderId, type ProviderProfile } from './accounts.oauth-providers';
import { oauthStates, userIdentities, users } from './accounts.tables';

const STATE_TTL_MS = 10 * 60_000;
const secret = () => randomBytes(32).toString('base64url');
/** The browser cookie's value: 32 random bytes, base64url. */
const BROWSER_TOKEN = /^[A-Za-z0-9_-]{43}$/;

export const isBrowserToken = (value: unknown): value is string => typeof value === 'string' && BROWSER_TOKEN.test(value);
export const newBrowserToken = secret;

/** A callback that failed, and whether it was a link (the console's account page shows it) or a sign-in. */
export class OAuthCallbackError extends Error {
  constructor(
    readonly error: AppError,
    readonly linking: boolean,
  ) {
    super(error.message);
  }
}

export type CallbackResult = { kind: 'signed_in'; userId: string } | { kind: 'linked'; userId: string; provider: ProviderId };

export function createOAuth(ctx: AppContext) {
  const { db } = ctx.database;
  const providers = createProviders(ctx.config.accounts.oauth, ctx.config.publicUrl);

  function providerOf(id: string) {
    const provider = (PROVIDER_IDS as readonly string[]).includes(id) ? providers[id as ProviderId] : undefined;
    if (!provider) throw new AppError('not_found', `sign-in with "${id.slice(0, 40)}" is not enabled on this site`);
    return { id: id as ProviderId, provider };
  }

  /** The provider's authorization URL for a sign-in (linkUserId null) or for linking to a signed-in account. */
  async function begin(id: string, browserToken: string, linkUserId: string | null): Promise<string> {
    const { provider } = providerOf(id);
    const checks = { state: secret(), codeVerifier: randomPKCECodeVerifier(), nonce: provider.usesNonce ? secret() : null };
    const url = await provider.authorizationUrl(checks);
    const now = ctx.clock.now();
    // Abandoned starts go as new ones come.
    await db.delete(oauthStates).where(lte(oauthStates.expiresAt, now));
    await db.insert(oauthStates).values({
      id: newId('oas'),
      stateHash: sha256Hex(checks.state),
      provider: id,
      codeVerifier: checks.codeVerifier,
      nonce: checks.nonce,
      linkUserId,
      browserHash: sha256Hex(browserToken),
      expiresAt: new Date(now.getTime() + STATE_TTL_MS),
    });
    return url.toString();
  }

  /** Claims the state (deleting it), checks the browser, asks the provider who signed in, then finds, links or makes the account. */
  async function finish(id: string, query: URLSearchParams, browserToken: string | null): Promise<CallbackResult> {
    let linking = false;
    try {
      const { provider } = providerOf(id);
      const state = query.get('state');
      if (!state || state.length > 200) throw new AppError('invalid', 'the callback carries no state; start the sign-in again');
      const [claimed] = await db
        .delete(oauthStates)
        .where(and(eq(oauthStates.stateHash, sha256Hex(state)), eq(oauthStates.provider, id), gt(oauthStates.expiresAt, ctx.clock.now())))
        .returning();
      if (!claimed) throw new AppError('invalid', 'this sign-in is unknown, used or expired; start it again');
      linking = claimed.linkUserId !== null;
      if (!browserToken || sha256Hex(browserToken) !== claimed.browserHash)
        throw new AppError('invalid', 'this sign-in was started in another browser; start it again');
      const denied = query.get('error');
      if (denied) throw new AppError('invalid', `the provider did not sign you in (${denied.slice(0, 100)})`);
      const redirect = new URL(callbackUrl(ctx.config.publicUrl, id as ProviderId));
      redirect.search = query.toString();
      const profile = await provider.profile(redirect, { state, codeVerifier: claimed.codeVerifier, nonce: claimed.nonce });
      if (claimed.linkUserId) {
        await link(claimed.linkUserId, id as ProviderId, profile);
        return { kind: 'linked', userId: claimed.linkUserId, provider: id as ProviderId };
      }
      return { kind: 'signed_in', userId: await accountFor(id as ProviderId, profile) };
    } catch (err) {
      // Provider answers are AppErrors already (accounts.oauth-providers.ts); anything else is ours (the database).
      const error = err instanceof AppError ? err : new AppError('unavailable', 'the sign-in could not be finished; try again');
      if (!(err instanceof AppError)) ctx.log.warn({ err, provider: id }, 'oauth callback failed');
      throw new OAuthCallbackError(error, linking);
    }
  }

  async function identityOwner(provider: ProviderId, subject: string) {
    const [row] = await db
      .select({ userId: userIdentities.userId, disabled: users.disabled })
      .from(userIdentities)
      .innerJoin(users, eq(users.id, userIdentities.userId))
      .where(and(eq(userIdentities.provider, provider), eq(userIdentities.subject, subject)))
      .limit(1);
    return row ?? null;
  }

  const identityRow = (userId: string, provider: ProviderId, profile: ProviderProfile) => ({
    id: newId('idn'),
    userId,
    provider,
    subject: profile.subject,
    email: profile.email,
    createdAt: ctx.clock.now(),
  });

  async function link(userId: string, provider: ProviderId, profile: ProviderProfile) {
    const owner = await identityOwner(provider, profile.subject);
    if (owner && owner.userId !== userId) throw new AppError('conflict', 'this provider account is already linked to another account');
    if (owner) return;
    const inserted = await db
      .insert(userIdentities)
      .values(identityRow(userId, provider, profile))
      .onConflictDoNothing()
      .returning({ id: userIdentities.id });
    if (inserted.length === 0) throw new AppError('conflict', 'this provider account is already linked to another account');
  }

  /** The account this profile signs in to: by identity, then by verified email (linked now), else a new one. */
  async function accountFor(provider: ProviderId, profile: ProviderProfile): Promise<string> {
    const owner = await identityOwner(provider, profile.subject);
    if (owner) {
      if (owner.disabled) throw new AppError('forbidden', 'this account is disabled');
      return owner.userId;
    }
    const email = profile.email?.trim() || null;
    const [holder] = email
      ? await db
          .select({ id: users.id, disabled: users.disabled, emailVerifiedAt: users.emailVerifiedAt })
          .from(users)
          .where(sql`lower(${users.email}) = ${email.toLowerCase()}`)
          .limit(1)
      : [];
    if (holder && !profile.emailVerified)
      throw new AppError(
        'conflict',
        'an account with this email exists; sign in to it another way and link this provider from the account page',
      );
    if (holder) {
      if (holder.disabled) throw new AppError('forbidden', 'this account is disabled');
      await db.transaction(async (tx) => {
        const inserted = await tx
          .insert(userIdentities)
          .values(identityRow(holder.id, provider, profile))
          .onConflictDoNothing()
          .returning({ id: userIdentities.id });
        if (inserted.length === 0) throw new AppError('conflict', 'this sign-in happened twice at once; try again');
        // The provider vouched for the address: it is proven for this account too.
        if (!holder.emailVerifiedAt) await tx.update(users).set({ emailVerifiedAt: ctx.clock.now() }).where(eq(users.id, holder.id));
      });
      return holder.id;
    }
    if (ctx.config.registration === 'closed') throw new AppError('forbidden', 'registration is closed on this site');
    const userId = newId('usr');
    await db.transaction(async (tx) => {
      const made = await tx
        .insert(users)
        .values({ id: userId, email, passwordHash: null, emailVerifiedAt: email && profile.emailVerified ? ctx.clock.now() : null })
        .onConflictDoNothing()
        .returning({ id: users.id });
      if (made.length === 0)
        throw new AppError(
          'conflict',
          'an account with this email exists; sign in to it another way and link this provider from the account page',
        );
      const inserted = await tx
        .insert(userIdentities)
        .values(identityRow(userId, provider, profile))
        .onConflictDoNothing()
        .returning({ id: userIdentities.id });
      if (inserted.length === 0) throw new AppError('conflict', 'this sign-in happened twice at once; try again');
    });
    return userId;
  }

  return { begin, finish };
}

export type OAuth = ReturnType<typeof createOAuth>;

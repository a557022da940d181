/** Request and response schemas of the accounts routes. */
import { t } from 'elysia';

const password = t.String({ minLength: 8, maxLength: 128 });
const code = t.String({ minLength: 1, maxLength: 32, description: 'a 6-digit TOTP code or a recovery code' });

export const RegisterBody = t.Object({
  email: t.String({ format: 'email', maxLength: 128 }),
  password,
  phone: t.Optional(t.String({ maxLength: 32 })),
});

export const LoginBody = t.Object({
  identifier: t.String({ minLength: 1, maxLength: 128, description: 'email or phone' }),
  password: t.String({ minLength: 1, maxLength: 128 }),
});

export const VerifyBody = t.Object({ challenge_token: t.String({ minLength: 1, maxLength: 128 }), code });
export const CodeBody = t.Object({ code });
export const ChangePasswordBody = t.Object({
  current_password: t.Optional(t.String({ minLength: 1, maxLength: 128, description: 'required when the account has a password' })),
  new_password: password,
});
const keyName = t.String({ minLength: 1, maxLength: 100 });
const Limits = {
  models: t.Optional(t.Nullable(t.Array(t.String({ minLength: 1, maxLength: 200 }), { minItems: 1, maxItems: 200, description: 'allowed model slugs or route names' }))),
  spend_limit: t.Optional(t.Nullable(t.Number({ minimum: 0, description: 'major units of the site currency, at most 6 decimals' }))),
  spend_period: t.Optional(t.Nullable(t.Union([t.Literal('day'), t.Literal('month'), t.Literal('total')], { description: 'UTC day or month; total (default) is the key life' }))),
  expires_at: t.Optional(t.Nullable(t.String({ maxLength: 64, description: 'ISO 8601' }))),
  rpm: t.Optional(t.Nullable(t.Integer({ minimum: 1, maximum: 1_000_000, description: 'requests per minute' }))),
  capture: t.Optional(t.Boolean({ description: "capture this key's requests and answers (docs/captures.md); default false" })),
};
const orgId = t.String({ minLength: 1, maxLength: 64, description: "an organization's id: its key, paid by its wallet" });
export const ApiKeyBody = t.Object({ name: keyName, ...Limits, org_id: t.Optional(t.Nullable(orgId)) });
export const ApiKeyListQuery = t.Object({ org_id: t.Optional(orgId) });
export const ApiKeyPatch = t.Object({ name: t.Optional(keyName), ...Limits }, { minProperties: 1, description: "the fields to change; null clears a limit" });
export const IdParams = t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) });

const User = t.Object({ id: t.String(), email: t.Union([t.String(), t.Null()]) });
export const SignedIn = t.Object({ token: t.String(), user: User });
/** 202 of a request whose outcome goes by mail (and says nothing more here). */
export const Accepted = t.Object({});
export const LoginResponse = t.Union([
  SignedIn,
  t.Object({ two_factor_required: t.Literal(true), challenge_token: t.String(), expires_at: t.String() }),
]);
export const Me = t.Object({
  id: t.String(),
  email: t.Union([t.String(), t.Null()]),
  phone: t.Nullable(t.String()),
  is_admin: t.Boolean(),
  has_password: t.Boolean(),
  two_factor_enabled: t.Boolean(),
  email_verified: t.Boolean(),
  created_at: t.String(),
});
export const SessionList = t.Array(
  t.Object({
    id: t.String(),
    created_at: t.String(),
    expires_at: t.String(),
    user_agent: t.Nullable(t.String()),
    ip: t.Nullable(t.String()),
    current: t.Boolean(),
  }),
);
const ApiKey = t.Object({
  id: t.String(),
  prefix: t.String(),
  name: t.String(),
  created_at: t.String(),
  last_used_at: t.Nullable(t.String()),
  models: t.Nullable(t.Array(t.String())),
  spend_limit: t.Nullable(t.Number()),
  spend_period: t.Nullable(t.String()),
  spent: t.Number({ description: 'spent in the current period (all time when there is no period)' }),
  expires_at: t.Nullable(t.String()),
  rpm: t.Nullable(t.Integer()),
  capture: t.Boolean(),
  org_id: t.Nullable(t.String({ description: 'the organization paying for the key; null: a personal key' })),
  created_by: t.String({ description: 'the account that made the key' }),
});
export { ApiKey };
export const ApiKeyList = t.Array(ApiKey);
export const CreatedApiKey = t.Object({ ...ApiKey.properties, key: t.String() });
export const TwoFactorSetup = t.Object({ secret: t.String(), otpauth_url: t.String() });
export const TwoFactorEnabled = t.Object({ enabled: t.Literal(true), recovery_codes: t.Array(t.String()) });

/** Request and response schemas of the accounts routes (DECISIONS §3). */
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
export const ChangePasswordBody = t.Object({ current_password: t.String({ minLength: 1, maxLength: 128 }), new_password: password });
export const ApiKeyBody = t.Object({ name: t.String({ minLength: 1, maxLength: 100 }) });
export const IdParams = t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) });

const User = t.Object({ id: t.String(), email: t.String() });
export const SignedIn = t.Object({ token: t.String(), user: User });
export const LoginResponse = t.Union([
  SignedIn,
  t.Object({ two_factor_required: t.Literal(true), challenge_token: t.String(), expires_at: t.String() }),
]);
export const Me = t.Object({
  id: t.String(),
  email: t.String(),
  phone: t.Nullable(t.String()),
  is_admin: t.Boolean(),
  two_factor_enabled: t.Boolean(),
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
const ApiKey = t.Object({ id: t.String(), prefix: t.String(), name: t.String(), created_at: t.String(), last_used_at: t.Nullable(t.String()) });
export const ApiKeyList = t.Array(ApiKey);
export const CreatedApiKey = t.Object({ ...ApiKey.properties, key: t.String() });
export const TwoFactorSetup = t.Object({ secret: t.String(), otpauth_url: t.String() });
export const TwoFactorEnabled = t.Object({ enabled: t.Literal(true), recovery_codes: t.Array(t.String()) });

/**
 * /api/auth/email/*, /api/auth/password/forgot|reset and /api/auth/notifications: the mail side
 * of accounts (accounts.email.ts, accounts.notifications.ts do the work).
 */
import { Elysia, t } from 'elysia';
import type { Server } from 'bun';
import type { Config } from '../../config';
import type { authPlugin } from '../../platform/http/auth';
import { clientAddress } from '../../platform/http/client-address';
import type { AccountsService } from './accounts.service';

const Token = t.String({ minLength: 1, maxLength: 256, description: 'the token from the mailed link' });
const Accepted = t.Object({});

export const NotificationSettings = t.Object({
  low_balance: t.Nullable(t.Number({ description: 'mail when the balance falls below this (major units of the site currency); null: off' })),
  currency: t.String(),
  language: t.UnionEnum(['en', 'zh-CN'], { description: 'the language of your mails' }),
});

export interface EmailRoutesDeps {
  accounts: AccountsService;
  auth: ReturnType<typeof authPlugin>;
  config: Config;
}

export const accountEmailRoutes = ({ accounts, auth, config }: EmailRoutesDeps) => {
  const { email, notifications } = accounts;
  const asker = (request: Request, server: Server<unknown> | null) => ({ address: clientAddress(request, server, config.trustProxy) });

  return new Elysia({ name: 'cpd/accounts/email', detail: { tags: ['accounts'] } })
    .use(auth)
    .post(
      '/api/auth/email/verify/send',
      async ({ caller, request, server, set }) => {
        await email.sendVerification(caller.userId, asker(request, server));
        set.status = 202;
        return {};
      },
      { auth: ['session'], response: { 202: Accepted }, detail: { summary: 'Mail a new verification link to your address' } },
    )
    .post('/api/auth/email/verify', ({ body }) => email.verify(body.token), {
      body: t.Object({ token: Token }),
      response: { 200: t.Object({ email: t.String(), email_verified: t.Literal(true) }) },
      detail: { summary: 'Verify your email with the mailed token (no session needed)' },
    })
    .post(
      '/api/auth/password/forgot',
      async ({ body, request, server, set }) => {
        await email.forgot(body.email, asker(request, server));
        set.status = 202;
        return {};
      },
      {
        body: t.Object({ email: t.String({ format: 'email', maxLength: 128 }) }),
        response: { 202: Accepted },
        detail: { summary: 'Mail a password reset link (the same answer whether or not the address has an account)' },
      },
    )
    .post(
      '/api/auth/password/reset',
      async ({ body, set }) => {
        await email.reset(body.token, body.password);
        set.status = 204;
      },
      {
        body: t.Object({ token: Token, password: t.String({ minLength: 8, maxLength: 128 }) }),
        detail: { summary: 'Set a new password with the mailed token (ends every session of the account)' },
      },
    )
    .get('/api/auth/notifications', ({ caller }) => notifications.settings(caller.userId), {
      auth: ['session'],
      response: { 200: NotificationSettings },
      detail: { summary: 'Your mail notification settings' },
    })
    .put('/api/auth/notifications', ({ caller, body }) => notifications.update(caller.userId, body), {
      auth: ['session'],
      body: t.Object(
        { low_balance: t.Optional(t.Nullable(t.Number())), language: t.Optional(t.Union([t.Literal('en'), t.Literal('zh-CN')])) },
        { minProperties: 1, description: 'the fields to change' },
      ),
      response: { 200: NotificationSettings },
      detail: { summary: 'Set or turn off (null) the low balance mail; choose the language of your mails' },
    });
};

/** /api/auth/phone/*: request a code by SMS, sign in (or up) with it, reset a password with it (accounts.phone.ts). */

import type { Server } from 'bun';
import { Elysia, t } from 'elysia';
import type { Config } from '../../config';
import { clientAddress } from '../../platform/http/client-address';
import { PHONE_PURPOSES, type PhoneCodes } from './accounts.phone';
import { sessionCookie } from './accounts.routes';
import * as s from './accounts.schemas';
import type { RequestMeta } from './accounts.service';

const phone = t.String({
  minLength: 1,
  maxLength: 32,
  description: 'with its country code (+8613800000000); on the China site a bare mainland number is +86',
});
const code = t.String({ minLength: 1, maxLength: 16, description: 'the 6 digits sent by SMS' });

export const PhoneCodeBody = t.Object({ phone, purpose: t.Union(PHONE_PURPOSES.map((p) => t.Literal(p))) });
export const PhoneLoginBody = t.Object({ phone, code });
export const PhoneResetBody = t.Object({ phone, code, password: t.String({ minLength: 8, maxLength: 128 }) });

export const phoneRoutes = ({ phoneCodes, config }: { phoneCodes: PhoneCodes; config: Config }) => {
  const meta = (request: Request, server: Server<unknown> | null): RequestMeta => ({
    address: clientAddress(request, server, config.trustProxy),
    userAgent: request.headers.get('user-agent'),
  });
  const { setSessionCookie } = sessionCookie(config);

  return new Elysia({ name: 'cpd/accounts-phone', detail: { tags: ['accounts'] } })
    .post(
      '/api/auth/phone/code',
      async ({ body, request, server, set }) => {
        await phoneCodes.requestCode(body, meta(request, server));
        set.status = 202;
        return {};
      },
      {
        body: PhoneCodeBody,
        response: { 202: t.Object({}) },
        detail: { summary: 'Send a 6-digit code by SMS (202 for every number: it never says whether an account exists)' },
      },
    )
    .post(
      '/api/auth/phone/login',
      async ({ body, request, server, cookie, set }) => {
        const { result, created } = await phoneCodes.loginWithCode(body, meta(request, server));
        if ('token' in result) setSessionCookie(cookie, result.token);
        if (created) set.status = 201;
        return result;
      },
      {
        body: PhoneLoginBody,
        response: { 200: s.LoginResponse, 201: s.SignedIn },
        detail: {
          summary: 'Sign in with a login or register code (201 when a register code made the account; a 2FA account answers the challenge)',
        },
      },
    )
    .post(
      '/api/auth/phone/reset',
      async ({ body, request, server, set }) => {
        await phoneCodes.resetWithCode(body, meta(request, server));
        set.status = 204;
      },
      { body: PhoneResetBody, detail: { summary: 'Set a new password with a reset code (ends every session of the account)' } },
    );
};

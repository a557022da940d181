/**
 * Mail through the compiled binary (dist/cpd as a process): nodemailer inside `bun build
 * --compile` talks to a real SMTP server (STARTTLS, AUTH), and a forgotten password is reset the
 * way a person does it: forgot → the mail → the link's token → reset → log in.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestContext, type TestContext } from '../../support/app';
import { type RunningBinary, startBinary } from '../../support/binary';
import { linkIn, type SmtpServer, startSmtp, tokenOf } from '../../support/smtp';

const SMTP_PASS = 'binary-smtp-secret-42';

describe('mail in the compiled binary (postgres)', () => {
  let tc: TestContext;
  let smtp: SmtpServer;
  let cpd: RunningBinary;

  beforeAll(async () => {
    tc = await createTestContext('postgres');
    smtp = await startSmtp({ auth: { user: 'cpd', pass: SMTP_PASS } });
    cpd = await startBinary({
      env: { DATABASE_URL: tc.testDb.url!, SMTP_URL: smtp.url, MAIL_FROM: 'cpd <noreply@binary.example>', SECRET_KEY: 'binary-test-secret-0123456789abcdef0123' },
    });
  }, 120_000);
  afterAll(async () => {
    expect(await cpd?.stop()).toBe(0);
    await smtp?.close();
    await tc?.close();
  });

  const post = (path: string, body: unknown, token?: string) =>
    fetch(`${cpd.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });

  test('sign up, forget the password, reset it from the mailed link, log in with the new one', async () => {
    const registered = await post('/api/auth/register', { email: 'walker@binary.example', password: 'first password 1' });
    expect(registered.status).toBe(201);
    const { token: first } = (await registered.json()) as { token: string };
    const verify = await smtp.next((m) => m.to === 'walker@binary.example' && m.subject === 'Confirm your email address');
    expect(verify.secure).toBe(true);
    expect(verify.user).toBe('cpd');

    const forgot = await post('/api/auth/password/forgot', { email: 'walker@binary.example' });
    expect(forgot.status).toBe(202);
    expect(await forgot.json()).toEqual({});
    const mail = await smtp.next((m) => m.to === 'walker@binary.example' && m.subject === 'Reset your password');
    expect(String(mail.headers.get('message-id'))).toEndWith('@binary.example>');
    // PUBLIC_URL defaults to http://localhost:PORT; the path and token are what matter here.
    const link = linkIn(mail, 'http://localhost:');
    expect(new URL(link).pathname).toBe('/reset-password');

    // The console page behind the link is served without a session.
    const page = await fetch(`${cpd.url}/reset-password?token=${tokenOf(link)}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toStartWith('text/html');

    const reset = await post('/api/auth/password/reset', { token: tokenOf(link), password: 'second password 2' });
    expect(reset.status).toBe(204);
    expect((await fetch(`${cpd.url}/api/auth/me`, { headers: { authorization: `Bearer ${first}` } })).status).toBe(401);
    expect((await post('/api/auth/login', { identifier: 'walker@binary.example', password: 'first password 1' })).status).toBe(401);
    const login = await post('/api/auth/login', { identifier: 'walker@binary.example', password: 'second password 2' });
    expect(login.status).toBe(200);
    const me = await fetch(`${cpd.url}/api/auth/me`, { headers: { authorization: `Bearer ${((await login.json()) as { token: string }).token}` } });
    expect(await me.json()).toMatchObject({ email: 'walker@binary.example', email_verified: true });
    await smtp.next((m) => m.to === 'walker@binary.example' && m.subject === 'Your password was changed');

    const logs = cpd.logs();
    expect(logs).toContain('"msg":"mail sent"');
    expect(logs).not.toContain(SMTP_PASS);
    expect(logs).not.toContain(tokenOf(link));
  });
});

/**
 * Mail for accounts against a real SMTP server in this process (smtp-server, parsed by
 * mailparser): verification and reset links that work against the app, headers, both languages
 * and both sites, throttles without enumeration, EMAIL_VERIFICATION=required, and no secret in
 * the logs.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { sql } from 'drizzle-orm';
import { createTestApp, type TestApp } from '../../support/app';
import { manualClock, MINUTE } from '../../support/clock';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';
import { linkIn, type SmtpServer, startSmtp, tokenOf } from '../../support/smtp';
import { waitFor } from '../../support/wait';

const PUBLIC = 'http://localhost:8080';
const SMTP_USER = 'cpd-mailer';
const SMTP_PASS = 'smtp-pa55word-never-logged';

for (const kind of DB_KINDS) {
  describe(`mail, international site, SMTP with STARTTLS and AUTH (${kind})`, () => {
    let t: TestApp;
    let smtp: SmtpServer;
    const clock = manualClock();
    const mailedTokens: string[] = [];

    beforeAll(async () => {
      smtp = await startSmtp({ auth: { user: SMTP_USER, pass: SMTP_PASS } });
      t = await createTestApp(kind, { SMTP_URL: smtp.url, MAIL_FROM: 'cpd <noreply@mail.example>', TRUST_PROXY: 'true', RATE_LIMITS: 'register=100/1m' }, { clock });
    });
    afterAll(async () => {
      await t.close();
      await smtp.close();
    });

    const from = (address: string) => ({ 'x-forwarded-for': address });
    const register = (email: string, headers: Record<string, string> = {}) =>
      t.request('POST', '/api/auth/register', { body: { email, password: 'first password 1' }, headers: { 'x-forwarded-for': '10.1.0.1', ...headers } });
    const login = (email: string, password: string) => t.request('POST', '/api/auth/login', { body: { identifier: email, password } });
    const forgot = (email: string, address = '10.2.0.1') => t.request('POST', '/api/auth/password/forgot', { body: { email }, headers: from(address) });
    const mailTo = async (address: string, subject: string | RegExp) => {
      const mail = await smtp.next((m) => m.to === address && (typeof subject === 'string' ? m.subject === subject : subject.test(m.subject)), `"${subject}" to ${address}`);
      for (const word of mail.text.split(/\s+/)) if (word.includes('token=')) mailedTokens.push(tokenOf(word));
      return mail;
    };

    test('registration mails a verification link (headers, TLS, auth, English); the link verifies the address once', async () => {
      const res = await register('new@verify.example', { 'accept-language': 'en-GB,en;q=0.9' });
      expect(res.status).toBe(201);
      expect(res.body.token).toBeString();
      const me = await t.request('GET', '/api/auth/me', { token: res.body.token });
      expect(me.body.email_verified).toBe(false);

      const mail = await mailTo('new@verify.example', 'Confirm your email address');
      expect(mail.secure).toBe(true); // STARTTLS was offered and taken
      expect(mail.user).toBe(SMTP_USER);
      expect(mail.headers.get('from')).toMatchObject({ value: [{ name: 'cpd', address: 'noreply@mail.example' }] });
      expect(mail.headers.get('to')).toMatchObject({ value: [{ address: 'new@verify.example' }] });
      expect(String(mail.headers.get('message-id'))).toMatch(/^<[0-9a-f]{32}@mail\.example>$/);
      expect(mail.headers.get('date')).toBeInstanceOf(Date);
      const link = linkIn(mail, `${PUBLIC}/verify-email?token=`);
      expect(mail.html).toContain(link);
      expect(tokenOf(link)).toMatch(/^[A-Za-z0-9_-]{43}$/); // 256 bits

      const verified = await t.request('POST', '/api/auth/email/verify', { body: { token: tokenOf(link) } });
      expect(verified.status).toBe(200);
      expect(verified.body).toEqual({ email: 'new@verify.example', email_verified: true });
      expect((await t.request('GET', '/api/auth/me', { token: res.body.token })).body.email_verified).toBe(true);
      const again = await t.request('POST', '/api/auth/email/verify', { body: { token: tokenOf(link) } });
      expect(again.status).toBe(400);
      expect(again.body).toEqual({ error: expect.any(String) });
      // Only the hash is stored.
      const [row] = await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from account_tokens where token_hash = ${tokenOf(link)}`);
      expect(row!.n).toBe(0);
      // Verified: asking for another link is 409.
      expect((await t.request('POST', '/api/auth/email/verify/send', { token: res.body.token })).status).toBe(409);
    });

    test('the language of the request at sign-up is the language of the account’s mails (cpd_lang cookie, Accept-Language)', async () => {
      expect((await register('zh@verify.example', { cookie: 'cpd_lang=zh-CN', 'accept-language': 'en' })).status).toBe(201);
      const mail = await mailTo('zh@verify.example', '请确认您的邮箱地址');
      expect(mail.text).toContain('24 小时内有效');
      expect(mail.html).toContain('lang="zh-CN"');
      expect((await register('zh2@verify.example', { 'accept-language': 'zh-TW,zh;q=0.9' })).status).toBe(201);
      await mailTo('zh2@verify.example', '请确认您的邮箱地址');
      const [row] = await t.ctx.database.query<{ locale: string }>(sql`select locale from users where email = 'zh2@verify.example'`);
      expect(row!.locale).toBe('zh-CN');
    });

    test('verify/send mails a new link (session needed); a wrong token is 400 and changes nothing', async () => {
      const u = await makeUser(t, { email: 'resend@verify.example' });
      expect((await t.request('POST', '/api/auth/email/verify/send')).status).toBe(401);
      const sent = await t.request('POST', '/api/auth/email/verify/send', { token: u.token, headers: from('10.3.0.1') });
      expect(sent.status).toBe(202);
      expect(sent.body).toEqual({});
      const link = linkIn(await mailTo('resend@verify.example', 'Confirm your email address'), `${PUBLIC}/verify-email?token=`);
      for (const token of ['nope', `${tokenOf(link)}x`, '']) expect((await t.request('POST', '/api/auth/email/verify', { body: { token } })).status).toBe(400);
      expect((await t.request('GET', '/api/auth/me', { token: u.token })).body.email_verified).toBe(false);
      expect((await t.request('POST', '/api/auth/email/verify', { body: { token: tokenOf(link) } })).status).toBe(200);
    });

    test('verify/send is throttled per address mailed (5 an hour); each mail carries its own link, any of which verifies', async () => {
      const u = await makeUser(t, { email: 'eager@verify.example' });
      const statuses = [];
      for (let i = 0; i < 6; i++) statuses.push((await t.request('POST', '/api/auth/email/verify/send', { token: u.token, headers: from(`10.3.1.${i}`) })).status);
      expect(statuses).toEqual([202, 202, 202, 202, 202, 429]);
      const links = [];
      for (let i = 0; i < 5; i++) links.push(linkIn(await mailTo('eager@verify.example', 'Confirm your email address'), `${PUBLIC}/verify-email?token=`));
      expect(new Set(links).size).toBe(5);
      expect((await t.request('POST', '/api/auth/email/verify', { body: { token: tokenOf(links[2]!) } })).status).toBe(200);
    });

    test('a verification link sent to an old address does not verify a changed one', async () => {
      const u = await makeUser(t, { email: 'before@verify.example' });
      await t.request('POST', '/api/auth/email/verify/send', { token: u.token, headers: from('10.3.0.2') });
      const link = linkIn(await mailTo('before@verify.example', 'Confirm your email address'), `${PUBLIC}/verify-email?token=`);
      await t.ctx.database.query(sql`update users set email = 'after@verify.example' where id = ${u.id}`);
      expect((await t.request('POST', '/api/auth/email/verify', { body: { token: tokenOf(link) } })).status).toBe(400);
      expect((await t.request('GET', '/api/auth/me', { token: u.token })).body.email_verified).toBe(false);
    });

    test('forgot → reset: 202 {} for known and unknown addresses alike; the link sets the password once and ends every session', async () => {
      const u = await makeUser(t, { email: 'forgetful@reset.example', password: 'old password 123' });
      const other = (await login('forgetful@reset.example', 'old password 123')).body.token;
      const unknown = await forgot('nobody@reset.example');
      const known = await forgot('Forgetful@Reset.example');
      expect([unknown.status, known.status]).toEqual([202, 202]);
      expect(unknown.text).toBe(known.text);
      expect(known.body).toEqual({});
      const mail = await mailTo('forgetful@reset.example', 'Reset your password');
      const link = linkIn(mail, `${PUBLIC}/reset-password?token=`);

      const short = await t.request('POST', '/api/auth/password/reset', { body: { token: tokenOf(link), password: 'short' } });
      expect(short.status).toBe(400);
      const reset = await t.request('POST', '/api/auth/password/reset', { body: { token: tokenOf(link), password: 'new password 456' } });
      expect(reset.status).toBe(204);
      expect(reset.text).toBe('');
      for (const token of [u.token, other]) expect((await t.request('GET', '/api/auth/me', { token })).status).toBe(401);
      expect((await login('forgetful@reset.example', 'old password 123')).status).toBe(401);
      expect((await login('forgetful@reset.example', 'new password 456')).status).toBe(200);
      const twice = await t.request('POST', '/api/auth/password/reset', { body: { token: tokenOf(link), password: 'third password 789' } });
      expect(twice.status).toBe(400);
      expect((await login('forgetful@reset.example', 'new password 456')).status).toBe(200);

      const changed = await mailTo('forgetful@reset.example', 'Your password was changed');
      expect(linkIn(changed, `${PUBLIC}/forgot-password`)).toBe(`${PUBLIC}/forgot-password`);
      expect(smtp.to('nobody@reset.example')).toEqual([]);
      // The link proved the address.
      expect((await t.request('GET', '/api/auth/me', { token: (await login('forgetful@reset.example', 'new password 456')).body.token })).body.email_verified).toBe(true);
    });

    test('a reset link expires after 30 minutes', async () => {
      await makeUser(t, { email: 'slow@reset.example', password: 'old password 123' });
      expect((await forgot('slow@reset.example', '10.2.1.1')).status).toBe(202);
      const link = linkIn(await mailTo('slow@reset.example', 'Reset your password'), `${PUBLIC}/reset-password?token=`);
      clock.advance(30 * MINUTE + 1000);
      const late = await t.request('POST', '/api/auth/password/reset', { body: { token: tokenOf(link), password: 'new password 456' } });
      expect(late.status).toBe(400);
      expect((await login('slow@reset.example', 'old password 123')).status).toBe(200);
    });

    test('forgot is throttled per email (5 an hour) and per client address (20 an hour), known or not', async () => {
      await makeUser(t, { email: 'popular@reset.example' });
      for (const email of ['popular@reset.example', 'ghost@reset.example']) {
        const statuses = [];
        for (let i = 0; i < 6; i++) statuses.push((await forgot(email, `10.4.${email.length}.${i}`)).status);
        expect(statuses).toEqual([202, 202, 202, 202, 202, 429]);
        const limited = await forgot(email, '10.4.99.1');
        expect(limited.body).toEqual({ error: expect.any(String) });
        expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      }
      const statuses = [];
      for (let i = 0; i < 21; i++) statuses.push((await forgot(`someone-${i}@reset.example`, '10.5.0.1')).status);
      expect(statuses.slice(0, 20).every((s) => s === 202)).toBe(true);
      expect(statuses[20]).toBe(429);
      // An hour later the address may ask again.
      clock.advance(61 * MINUTE);
      expect((await forgot('someone-0@reset.example', '10.5.0.1')).status).toBe(202);
    });

    test('changing the password in the console mails the owner', async () => {
      const u = await makeUser(t, { email: 'changer@reset.example', password: 'old password 123' });
      const res = await t.request('POST', '/api/auth/password', { token: u.token, body: { current_password: 'old password 123', new_password: 'new password 456' } });
      expect(res.status).toBe(204);
      await mailTo('changer@reset.example', 'Your password was changed');
    });

    test('payment received (with the receipt link, which opens for the owner) and refund mails', async () => {
      const admin = await makeUser(t, { admin: true });
      const u = await makeUser(t, { email: 'payer@money.example' });
      const created = await t.request('POST', '/api/billing/payments', { token: u.token, body: { provider: 'card', amount: 12.5, currency: 'USD' } });
      expect(created.status).toBe(201);
      await t.request('POST', `/api/payments/sandbox/${created.body.id}/pay`);
      const paid = await mailTo('payer@money.example', 'Payment received: $12.50');
      expect(paid.text).toContain(created.body.id);
      const receipt = linkIn(paid, `${PUBLIC}/api/billing/receipts/`);
      expect(receipt).toBe(`${PUBLIC}/api/billing/receipts/${created.body.id}/download`);
      const doc = await t.request('GET', `${new URL(receipt).pathname}?token=${u.token}`);
      expect(doc.status).toBe(200);

      const refund = await t.request('POST', `/api/admin/payments/${created.body.id}/refund`, { token: admin.token, body: { amount: 2.5, reason: 'test' } });
      expect(refund.status).toBe(200);
      const mail = await mailTo('payer@money.example', 'Refund: $2.50');
      expect(mail.text).toContain(created.body.id);
    });

    test('low balance: off by default; one mail per crossing below the threshold the owner set', async () => {
      const u = await makeUser(t, { email: 'thrifty@money.example' });
      const settings = await t.request('GET', '/api/auth/notifications', { token: u.token });
      expect(settings.body).toEqual({ low_balance: null, currency: 'USD', language: 'en' });
      for (const low_balance of [-1, 0, 1.1234567, '5', 1e13]) expect((await t.request('PUT', '/api/auth/notifications', { token: u.token, body: { low_balance } })).status).toBe(400);
      const set = await t.request('PUT', '/api/auth/notifications', { token: u.token, body: { low_balance: 5 } });
      expect(set.body).toEqual({ low_balance: 5, currency: 'USD', language: 'en' });

      const billing = t.services.billing;
      const { db } = t.ctx.database;
      let n = 0;
      const move = (micros: bigint) =>
        micros > 0n
          ? billing.credit(db, { userId: u.id, type: 'adjustment', amountMicros: micros, reference: `test-credit-${u.id}-${n++}`, description: 'test' })
          : billing.debitUsage(db, { userId: u.id, amountMicros: -micros, reference: `test-usage-${u.id}-${n++}`, description: 'test' });
      const notifiedAt = async () => (await t.ctx.database.query<{ at: Date | null }>(sql`select low_balance_notified_at as at from users where id = ${u.id}`))[0]!.at;

      await move(10_000_000n); // 10.00
      await move(-6_000_000n); // 4.00: below 5
      const low = await mailTo('thrifty@money.example', 'Your balance is low: $4.00');
      expect(low.text).toContain('$5.00');
      await move(-1_000_000n); // 3.00: still below, no second mail
      await move(7_000_000n); // 10.00: above again, the next crossing mails
      await waitFor(notifiedAt, 'the crossing to end', { until: (at) => at === null });
      await move(-8_000_000n); // 2.00
      await mailTo('thrifty@money.example', 'Your balance is low: $2.00');
      expect(smtp.to('thrifty@money.example').filter((m) => m.subject.startsWith('Your balance is low'))).toHaveLength(2);
      expect((await t.request('PUT', '/api/auth/notifications', { token: u.token, body: { low_balance: null } })).body).toEqual({ low_balance: null, currency: 'USD', language: 'en' });
    });

    test('the owner chooses the language of the mails', async () => {
      const u = await makeUser(t, { email: 'polyglot@verify.example' });
      for (const body of [{}, { language: 'fr' }, { language: null }]) expect([body, (await t.request('PUT', '/api/auth/notifications', { token: u.token, body })).status]).toEqual([body, 400]);
      const set = await t.request('PUT', '/api/auth/notifications', { token: u.token, body: { language: 'zh-CN' } });
      expect(set.body).toEqual({ low_balance: null, currency: 'USD', language: 'zh-CN' });
      await t.request('POST', '/api/auth/email/verify/send', { token: u.token, headers: from('10.3.0.3') });
      await mailTo('polyglot@verify.example', '请确认您的邮箱地址');
    });

    test('the pages behind the mailed links are served without a session, in the request’s language', async () => {
      for (const path of ['/forgot-password', '/reset-password?token=abc', '/verify-email?token=abc']) {
        const page = await t.request('GET', path, { headers: { 'accept-language': 'zh-CN' } });
        expect(page.status).toBe(200);
        expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
        expect(page.text).toContain('lang="zh-CN"');
      }
    });

    test('nothing secret in the logs: not the SMTP password, not a mailed token', async () => {
      expect(mailedTokens.length).toBeGreaterThan(3);
      const logs = t.logs.join('');
      expect(logs).toContain('"msg":"mail sent"');
      expect(logs).not.toContain(SMTP_PASS);
      expect(logs).not.toContain(Buffer.from(`\u0000${SMTP_USER}\u0000${SMTP_PASS}`).toString('base64'));
      for (const token of mailedTokens) expect(logs).not.toContain(token);
    });
  });

  describe(`mail, China site, EMAIL_VERIFICATION=required, plain SMTP without STARTTLS (${kind})`, () => {
    let t: TestApp;
    let smtp: SmtpServer;

    beforeAll(async () => {
      smtp = await startSmtp({ startTls: false });
      t = await createTestApp(kind, { SITE: 'cn', SMTP_URL: smtp.url, EMAIL_VERIFICATION: 'required' });
    });
    afterAll(async () => {
      await t.close();
      await smtp.close();
    });

    const register = (email: string) => t.request('POST', '/api/auth/register', { body: { email, password: 'first password 1' } });

    test('registration answers 202 {} for a new and a taken address alike; both hear by mail, in Chinese by default', async () => {
      await makeUser(t, { email: 'owner@cn.example' });
      const fresh = await register('fresh@cn.example');
      const taken = await register('Owner@cn.example');
      expect([fresh.status, taken.status]).toEqual([202, 202]);
      expect(fresh.text).toBe(taken.text);
      expect(fresh.body).toEqual({});
      expect(fresh.headers.get('set-cookie')).toBeNull();
      expect(taken.headers.get('set-cookie')).toBeNull();

      const attempt = await smtp.next((m) => m.to === 'owner@cn.example');
      expect(attempt.subject).toBe('有人尝试用您的邮箱注册');
      expect(attempt.secure).toBe(false);
      expect(linkIn(attempt, `${PUBLIC}/login`)).toBe(`${PUBLIC}/login`);
      const verify = await smtp.next((m) => m.to === 'fresh@cn.example');
      expect(verify.subject).toBe('请确认您的邮箱地址');
      expect(await t.ctx.database.query<{ n: number }>(sql`select count(*)::int as n from users where lower(email) = 'owner@cn.example'`)).toEqual([{ n: 1 }]);
    });

    test('an unverified account may log in but gets 403 for API keys and top-ups until it verifies', async () => {
      expect((await register('later@cn.example')).status).toBe(202);
      const link = linkIn(await smtp.next((m) => m.to === 'later@cn.example'), `${PUBLIC}/verify-email?token=`);
      const login = await t.request('POST', '/api/auth/login', { body: { identifier: 'later@cn.example', password: 'first password 1' } });
      expect(login.status).toBe(200);
      const token = login.body.token;
      const key = await t.request('POST', '/api/api-keys', { token, body: { name: 'first' } });
      expect(key.status).toBe(403);
      expect(key.body).toEqual({ error: 'verify your email first' });
      const pay = await t.request('POST', '/api/billing/payments', { token, body: { provider: 'app_wallet', amount: 10, currency: 'CNY' } });
      expect(pay.status).toBe(403);
      expect(pay.body).toEqual({ error: 'verify your email first' });
      expect((await t.request('GET', '/api/billing/payments', { token })).body.payments).toEqual([]);

      expect((await t.request('POST', '/api/auth/email/verify', { body: { token: tokenOf(link) } })).status).toBe(200);
      expect((await t.request('POST', '/api/api-keys', { token, body: { name: 'first' } })).status).toBe(201);
      const paid = await t.request('POST', '/api/billing/payments', { token, body: { provider: 'app_wallet', amount: 10, currency: 'CNY' } });
      expect(paid.status).toBe(201);
      await t.request('POST', `/api/payments/sandbox/${paid.body.id}/pay`);
      const mail = await smtp.next((m) => m.to === 'later@cn.example' && m.subject.startsWith('已收到付款'));
      expect(mail.subject).toBe('已收到付款：¥10.00');
      expect(linkIn(mail, `${PUBLIC}/console/invoices`)).toBe(`${PUBLIC}/console/invoices`);
    });
  });
}

describe('mail over SMTPS, the log transport, and a server that is down', () => {
  test('smtps:// speaks TLS from the first byte', async () => {
    const smtp = await startSmtp({ secure: true, auth: { user: 'u', pass: 'tls-only-pass' } });
    const t = await createTestApp('postgres', { SMTP_URL: smtp.url });
    try {
      await makeUser(t, { email: 'tls@mail.example' });
      expect((await t.request('POST', '/api/auth/password/forgot', { body: { email: 'tls@mail.example' } })).status).toBe(202);
      const mail = await smtp.next((m) => m.to === 'tls@mail.example');
      expect(mail.secure).toBe(true);
      expect(mail.user).toBe('u');
    } finally {
      await t.close();
      await smtp.close();
    }
  });

  test('on a loopback PUBLIC_URL without SMTP_URL, mails go to the log with their link', async () => {
    const t = await createTestApp('postgres', {});
    try {
      await makeUser(t, { email: 'dev@log.example' });
      expect((await t.request('POST', '/api/auth/password/forgot', { body: { email: 'dev@log.example' } })).status).toBe(202);
      const line = await waitFor(() => t.logs.find((l) => l.includes('mail (log transport)') && l.includes('dev@log.example')), 'the logged mail');
      expect(JSON.parse(line!).mail).toMatchObject({ kind: 'reset_password', to: 'dev@log.example', subject: 'Reset your password', text: expect.stringContaining(`${PUBLIC}/reset-password?token=`) });
    } finally {
      await t.close();
    }
  });

  test('an SMTP server that refuses the login: the request still answers 202, the failure is logged without the password', async () => {
    const smtp = await startSmtp({ auth: { user: 'right', pass: 'right-pass' } });
    const t = await createTestApp('postgres', { SMTP_URL: smtp.url.replace('right:right-pass', 'right:wrong-pass-value') });
    try {
      await makeUser(t, { email: 'unlucky@mail.example' });
      expect((await t.request('POST', '/api/auth/password/forgot', { body: { email: 'unlucky@mail.example' } })).status).toBe(202);
      const line = await waitFor(() => t.logs.find((l) => l.includes('"msg":"mail not sent"')), 'the failure line');
      expect(JSON.parse(line!).mail).toEqual({ kind: 'reset_password', user_id: expect.any(String) });
      expect(t.logs.join('')).not.toContain('wrong-pass-value');
      expect(smtp.failedLogins).toEqual(['right']);
    } finally {
      await t.close();
      await smtp.close();
    }
  });

  test('without mail (no SMTP_URL, public PUBLIC_URL): forgot is 404 and registration is as before', async () => {
    const t = await createTestApp('postgres', { PUBLIC_URL: 'https://cpd.example', PAYMENT_MODE: 'sandbox' });
    try {
      const res = await t.request('POST', '/api/auth/password/forgot', { body: { email: 'x@mail.example' } });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: expect.any(String) });
      const reg = await t.request('POST', '/api/auth/register', { body: { email: 'x@mail.example', password: 'long enough 1' } });
      expect(reg.status).toBe(201);
      expect((await t.request('POST', '/api/auth/email/verify/send', { token: reg.body.token })).status).toBe(404);
      expect((await t.request('PUT', '/api/auth/notifications', { token: reg.body.token, body: { low_balance: 5 } })).status).toBe(409);
    } finally {
      await t.close();
    }
  });
});

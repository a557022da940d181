import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeApiKey, makeUser } from '../../support/make';
import { auditEntries } from './support';

for (const kind of DB_KINDS) {
  describe(`admin users (${kind})`, () => {
    let t: TestApp;
    let admin: Awaited<ReturnType<typeof makeUser>>;
    let plain: Awaited<ReturnType<typeof makeUser>>;
    beforeAll(async () => {
      t = await createTestApp(kind);
      admin = await makeUser(t, { admin: true, email: 'root@ops.example' });
      plain = await makeUser(t, { email: 'plain@ops.example', phone: '+1 555 010 0001' });
    });
    afterAll(() => t.close());

    test('every admin route: 401 without a credential, 403 for a non-admin session or an API key, and nothing changes', async () => {
      const key = await makeApiKey(t, admin.id);
      const routes: Array<[string, string, unknown?]> = [
        ['GET', '/api/admin/users'],
        ['GET', `/api/admin/users/${plain.id}`],
        ['PATCH', `/api/admin/users/${plain.id}`, { disabled: true }],
        ['POST', `/api/admin/users/${plain.id}/password`, { password: 'takeover-123' }],
        ['POST', `/api/admin/users/${plain.id}/adjustments`, { amount: 5, reason: 'gift' }],
        ['GET', '/api/admin/payments'],
        ['POST', '/api/admin/payments/pay_x/reconcile'],
        ['GET', '/api/admin/audit'],
      ];
      for (const [method, path, body] of routes) {
        expect((await t.request(method, path, { body })).status).toBe(401);
        const forbidden = await t.request(method, path, { body, token: plain.token });
        expect(forbidden.status).toBe(403);
        expect(forbidden.body).toEqual({ error: expect.any(String) });
        expect((await t.request(method, path, { body, token: key.key })).status).toBe(401);
      }
      expect((await t.request('GET', '/api/auth/me', { token: plain.token })).status).toBe(200);
      expect(await t.services.billing.getBalanceMicros(plain.id)).toBe(0n);
      expect(await auditEntries(t, admin.token)).toEqual([]);
    });

    test('list: newest first with balance and currency; q matches email or phone; cursor pages; bad limit/cursor 400', async () => {
      const made = [];
      for (let i = 0; i < 5; i++) made.push(await makeUser(t, { email: `page-${i}@list.example` }));
      await t.request('POST', `/api/admin/users/${made[0]!.id}/adjustments`, { token: admin.token, body: { amount: 2.5, reason: 'list balance' } });
      const all = await t.request('GET', '/api/admin/users?q=list.example&limit=2', { token: admin.token });
      expect(all.status).toBe(200);
      expect(all.body.users.map((u: { email: string }) => u.email)).toEqual(['page-4@list.example', 'page-3@list.example']);
      expect(all.body.users[0]).toEqual({
        id: made[4]!.id,
        email: 'page-4@list.example',
        phone: null,
        is_admin: false,
        disabled: false,
        created_at: expect.any(String),
        balance: 0,
        currency: 'USD',
        price_group: 'default',
      });
      const seen = [...all.body.users];
      let cursor = all.body.next_cursor;
      while (cursor) {
        const next = await t.request('GET', `/api/admin/users?q=list.example&limit=2&cursor=${cursor}`, { token: admin.token });
        seen.push(...next.body.users);
        cursor = next.body.next_cursor;
      }
      expect(seen.map((u) => u.email)).toEqual([4, 3, 2, 1, 0].map((i) => `page-${i}@list.example`));
      expect(seen.at(-1).balance).toBe(2.5);

      const byPhone = await t.request('GET', `/api/admin/users?q=${encodeURIComponent('555 010')}`, { token: admin.token });
      expect(byPhone.body.users.map((u: { id: string }) => u.id)).toEqual([plain.id]);
      expect((await t.request('GET', '/api/admin/users?q=PLAIN%40OPS', { token: admin.token })).body.users).toHaveLength(1);
      expect((await t.request('GET', '/api/admin/users?q=%25', { token: admin.token })).body.users).toEqual([]); // % is literal
      expect((await t.request('GET', `/api/admin/users?q=${encodeURIComponent('( )')}`, { token: admin.token })).body.users).toEqual([]); // not every phone
      for (const q of ['limit=0', 'limit=201', 'limit=x', 'cursor=%%%', 'cursor=bm9wZQ'])
        expect((await t.request('GET', `/api/admin/users?${q}`, { token: admin.token })).status).toBe(400);
    });

    test('show one: sessions, keys, last sign-in; unknown id 404', async () => {
      const u = await makeUser(t, { email: 'detail@ops.example', password: 'detail-pass-1' });
      await makeApiKey(t, u.id);
      const login = await t.request('POST', '/api/auth/login', { body: { identifier: 'detail@ops.example', password: 'detail-pass-1' } });
      expect(login.status).toBe(200);
      const res = await t.request('GET', `/api/admin/users/${u.id}`, { token: admin.token });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: u.id, email: 'detail@ops.example', sessions_count: 2, keys_count: 1, balance: 0, currency: 'USD' });
      expect(Date.parse(res.body.last_login_at)).toBeGreaterThan(Date.now() - 60_000);
      const missing = await t.request('GET', '/api/admin/users/usr_nope', { token: admin.token });
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({ error: expect.any(String) });
    });

    test('disable: sessions end, keys are refused, sign-in is refused; enabling lets the account sign in again; audited', async () => {
      const u = await makeUser(t, { email: 'abuser@ops.example', password: 'abuser-pass-1' });
      const key = await makeApiKey(t, u.id);
      expect((await t.request('GET', '/api/usage', { token: key.key })).status).toBe(200); // the key is cached now
      const res = await t.request('PATCH', `/api/admin/users/${u.id}`, { token: admin.token, body: { disabled: true } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: u.id, disabled: true, sessions_count: 0, keys_count: 1 });
      expect((await t.request('GET', '/api/auth/me', { token: u.token })).status).toBe(401);
      expect((await t.request('GET', '/api/usage', { token: key.key })).status).toBe(401);
      const login = await t.request('POST', '/api/auth/login', { body: { identifier: 'abuser@ops.example', password: 'abuser-pass-1' } });
      expect(login.status).toBe(403);
      expect(login.body.error).toContain('disabled');

      expect((await t.request('PATCH', `/api/admin/users/${u.id}`, { token: admin.token, body: { disabled: false } })).body.disabled).toBe(false);
      expect((await t.request('GET', '/api/usage', { token: key.key })).status).toBe(200);
      expect((await t.request('POST', '/api/auth/login', { body: { identifier: 'abuser@ops.example', password: 'abuser-pass-1' } })).status).toBe(200);

      const [enabled, disabled] = (await auditEntries(t, admin.token)).filter((e) => e.target === u.id);
      expect(disabled).toMatchObject({
        actor_id: admin.id,
        actor_email: 'root@ops.example',
        action: 'user.update',
        details: { requested: { disabled: true }, changes: { disabled: { from: false, to: true } } },
      });
      expect(enabled).toMatchObject({ action: 'user.update', details: { changes: { disabled: { from: true, to: false } } } });
    });

    test('promote: the account can use the admin API; an admin cannot disable or demote itself (409, nothing changes)', async () => {
      const u = await makeUser(t, { email: 'deputy@ops.example' });
      expect((await t.request('GET', '/api/admin/users', { token: u.token })).status).toBe(403);
      const res = await t.request('PATCH', `/api/admin/users/${u.id}`, { token: admin.token, body: { is_admin: true } });
      expect(res.body.is_admin).toBe(true);
      expect((await t.request('GET', '/api/admin/users', { token: u.token })).status).toBe(200);
      expect((await auditEntries(t, admin.token))[0]).toMatchObject({ action: 'user.update', target: u.id, details: { changes: { is_admin: { from: false, to: true } } } });

      const before = (await auditEntries(t, admin.token)).length;
      for (const body of [{ disabled: true }, { is_admin: false }]) {
        const self = await t.request('PATCH', `/api/admin/users/${admin.id}`, { token: admin.token, body });
        expect(self.status).toBe(409);
        expect(self.body).toEqual({ error: expect.any(String) });
      }
      expect((await t.request('GET', '/api/auth/me', { token: admin.token })).body.is_admin).toBe(true);
      expect((await auditEntries(t, admin.token)).length).toBe(before);
      expect((await t.request('PATCH', '/api/admin/users/usr_nope', { token: admin.token, body: { disabled: true } })).status).toBe(404);
      expect((await t.request('PATCH', `/api/admin/users/${u.id}`, { token: admin.token, body: { disabled: 'yes' } })).status).toBe(400);
    });

    test('set a password: 204, sessions end, the old password no longer works; the value is never recorded', async () => {
      const u = await makeUser(t, { email: 'forgot@ops.example', password: 'old-password-1' });
      const short = await t.request('POST', `/api/admin/users/${u.id}/password`, { token: admin.token, body: { password: 'short' } });
      expect(short.status).toBe(400);
      expect((await t.request('GET', '/api/auth/me', { token: u.token })).status).toBe(200);
      const res = await t.request('POST', `/api/admin/users/${u.id}/password`, { token: admin.token, body: { password: 'brand-new-pass' } });
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect((await t.request('GET', '/api/auth/me', { token: u.token })).status).toBe(401);
      expect((await t.request('POST', '/api/auth/login', { body: { identifier: 'forgot@ops.example', password: 'old-password-1' } })).status).toBe(401);
      expect((await t.request('POST', '/api/auth/login', { body: { identifier: 'forgot@ops.example', password: 'brand-new-pass' } })).status).toBe(200);
      const entries = await auditEntries(t, admin.token);
      expect(entries[0]).toMatchObject({ action: 'user.password', target: u.id, actor_id: admin.id });
      expect(JSON.stringify(entries)).not.toContain('brand-new-pass');
      expect((await t.request('POST', '/api/admin/users/usr_nope/password', { token: admin.token, body: { password: 'brand-new-pass' } })).status).toBe(404);
    });
  });
}

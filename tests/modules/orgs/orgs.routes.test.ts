/**
 * Organizations through the HTTP API: create, list, rename, members and roles, invitations (the
 * link answered when no mail is configured), the last owner, the audit log, and bad input.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';
import { makeUser } from '../../support/make';

const tokenOf = (link: string) => new URL(link.replace('/#/', '/')).searchParams.get('token')!;

for (const kind of DB_KINDS) {
  describe(`organizations (${kind})`, () => {
    let t: TestApp;
    let owner: Awaited<ReturnType<typeof makeUser>>;
    let admin: Awaited<ReturnType<typeof makeUser>>;
    let member: Awaited<ReturnType<typeof makeUser>>;
    let stranger: Awaited<ReturnType<typeof makeUser>>;
    let orgId: string;

    beforeAll(async () => {
      t = await createTestApp(kind);
      [owner, admin, member, stranger] = await Promise.all([makeUser(t), makeUser(t), makeUser(t), makeUser(t)]);
    });
    afterAll(() => t.close());

    const join = async (org: string, who: { token: string; email: string }, role: string, by = owner) => {
      const invite = await t.request('POST', `/api/orgs/${org}/invites`, { token: by.token, body: { email: who.email, role } });
      expect(invite.status).toBe(201);
      const accepted = await t.request('POST', '/api/orgs/invites/accept', { token: who.token, body: { token: tokenOf(invite.body.link) } });
      expect(accepted.status).toBe(200);
      return accepted.body;
    };

    test('the creator owns a new organization with an empty wallet of the site currency', async () => {
      const created = await t.request('POST', '/api/orgs', { token: owner.token, body: { name: 'Acme' } });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({ id: expect.stringMatching(/^org_/), name: 'Acme', currency: 'USD', role: 'owner', member_count: 1, created_at: expect.any(String) });
      orgId = created.body.id;
      expect((await t.request('GET', '/api/orgs', { token: owner.token })).body).toEqual({ orgs: [created.body] });
      expect((await t.request('GET', '/api/orgs', { token: stranger.token })).body).toEqual({ orgs: [] });
      expect((await t.request('GET', `/api/billing/wallet?org_id=${orgId}`, { token: owner.token })).body).toMatchObject({ balance: 0, currency: 'USD' });
    });

    test('invitations: the link is answered without mail; accepting joins with its role, once', async () => {
      const invite = await t.request('POST', `/api/orgs/${orgId}/invites`, { token: owner.token, body: { email: admin.email, role: 'admin' } });
      expect(invite.status).toBe(201);
      expect(invite.body).toEqual({ id: expect.any(String), email: admin.email, role: 'admin', status: 'pending', expires_at: expect.any(String), created_at: expect.any(String), link: expect.stringContaining('/console/#/invite?token=') });
      expect((await t.request('GET', `/api/orgs/${orgId}/invites`, { token: owner.token })).body.invites).toHaveLength(1);
      const token = tokenOf(invite.body.link);
      const joined = await t.request('POST', '/api/orgs/invites/accept', { token: admin.token, body: { token } });
      expect(joined.status).toBe(200);
      expect(joined.body).toMatchObject({ id: orgId, role: 'admin', member_count: 2 });
      const again = await t.request('POST', '/api/orgs/invites/accept', { token: stranger.token, body: { token } });
      expect(again.status).toBe(400);
      expect(again.body).toEqual({ error: 'invalid invite' });
      expect((await t.request('GET', `/api/orgs/${orgId}/invites`, { token: owner.token })).body.invites).toEqual([]);
      await join(orgId, member, 'member', admin);
    });

    test('members see the organization and its members; non-members get 404; members get 403 on billing', async () => {
      const list = await t.request('GET', `/api/orgs/${orgId}/members`, { token: member.token });
      expect(list.status).toBe(200);
      expect(list.body.members.map((m: { email: string; role: string }) => [m.email, m.role])).toEqual([
        [owner.email, 'owner'],
        [admin.email, 'admin'],
        [member.email, 'member'],
      ]);
      expect(list.body.members[2]).toMatchObject({ spend_limit: null, spend_period: null, spent: '0.000000' });
      expect((await t.request('GET', `/api/orgs/${orgId}`, { token: member.token })).body.role).toBe('member');
      for (const path of [`/api/orgs/${orgId}`, `/api/orgs/${orgId}/members`, `/api/billing/wallet?org_id=${orgId}`]) {
        const res = await t.request('GET', path, { token: stranger.token });
        expect(res.status).toBe(404);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      for (const path of [`/api/billing/wallet?org_id=${orgId}`, `/api/billing/transactions?org_id=${orgId}`, `/api/usage?org_id=${orgId}`, `/api/orgs/${orgId}/audit`, `/api/orgs/${orgId}/invites`]) {
        expect((await t.request('GET', path, { token: member.token })).status).toBe(403);
      }
      expect((await t.request('POST', `/api/orgs/${orgId}/invites`, { token: member.token, body: { email: 'x@example.com', role: 'member' } })).status).toBe(403);
      expect((await t.request('PATCH', `/api/orgs/${orgId}`, { token: member.token, body: { name: 'Mine' } })).status).toBe(403);
    });

    test('roles: admins cannot make owners; a cap is set in major units; the last owner cannot leave or be demoted', async () => {
      expect((await t.request('PATCH', `/api/orgs/${orgId}/members/${member.id}`, { token: admin.token, body: { role: 'owner' } })).status).toBe(403);
      expect((await t.request('POST', `/api/orgs/${orgId}/invites`, { token: admin.token, body: { email: 'o@example.com', role: 'owner' } })).status).toBe(403);
      const capped = await t.request('PATCH', `/api/orgs/${orgId}/members/${member.id}`, { token: admin.token, body: { spend_limit: 1.5, spend_period: 'month' } });
      expect(capped.status).toBe(200);
      expect(capped.body).toMatchObject({ user_id: member.id, role: 'member', spend_limit: '1.500000', spend_period: 'month', spent: '0.000000' });
      const leave = await t.request('DELETE', `/api/orgs/${orgId}/members/${owner.id}`, { token: owner.token });
      expect(leave.status).toBe(409);
      expect(leave.body).toEqual({ error: 'an organization needs at least one owner' });
      expect((await t.request('PATCH', `/api/orgs/${orgId}/members/${owner.id}`, { token: owner.token, body: { role: 'admin' } })).status).toBe(409);
      // With a second owner the first may step down.
      expect((await t.request('PATCH', `/api/orgs/${orgId}/members/${admin.id}`, { token: owner.token, body: { role: 'owner' } })).body.role).toBe('owner');
      expect((await t.request('PATCH', `/api/orgs/${orgId}/members/${owner.id}`, { token: owner.token, body: { role: 'admin' } })).body.role).toBe('admin');
      expect((await t.request('PATCH', `/api/orgs/${orgId}/members/${owner.id}`, { token: admin.token, body: { role: 'owner' } })).body.role).toBe('owner');
    });

    test("org keys: members see their own, admins all; an admin revokes any; removing a member revokes the member's keys", async () => {
      const make = async (who: { token: string }, name: string) => {
        const res = await t.request('POST', '/api/api-keys', { token: who.token, body: { name, org_id: orgId } });
        expect(res.status).toBe(201);
        return res.body as { id: string; key: string; org_id: string; created_by: string };
      };
      const mine = await make(member, 'member key');
      const second = await make(member, 'member key 2');
      const admins = await make(admin, 'admin key');
      expect(mine).toMatchObject({ org_id: orgId, created_by: member.id });
      expect((await t.request('GET', '/v1/models', { token: mine.key })).status).toBe(200);
      // Not among the member's personal keys; in the organization's, as each may see them.
      expect((await t.request('GET', '/api/api-keys', { token: member.token })).body).toEqual([]);
      expect((await t.request('GET', `/api/api-keys?org_id=${orgId}`, { token: member.token })).body.map((k: { id: string }) => k.id).sort()).toEqual([mine.id, second.id].sort());
      expect((await t.request('GET', `/api/api-keys?org_id=${orgId}`, { token: owner.token })).body).toHaveLength(3);
      expect((await t.request('GET', `/api/api-keys?org_id=${orgId}`, { token: stranger.token })).status).toBe(404);
      expect((await t.request('POST', '/api/api-keys', { token: stranger.token, body: { name: 'x', org_id: orgId } })).status).toBe(404);
      // A member cannot revoke another's key; an admin can.
      expect((await t.request('DELETE', `/api/api-keys/${admins.id}`, { token: member.token })).status).toBe(404);
      expect((await t.request('DELETE', `/api/api-keys/${second.id}`, { token: admin.token })).status).toBe(204);
      // The organization's key reads none of its records.
      expect((await t.request('GET', '/api/usage', { token: mine.key })).status).toBe(403);

      const org3 = (await t.request('POST', '/api/orgs', { token: owner.token, body: { name: 'Third' } })).body.id;
      await join(org3, stranger, 'member');
      const strangers = (await t.request('POST', '/api/api-keys', { token: stranger.token, body: { name: 's', org_id: org3 } })).body;
      expect((await t.request('GET', '/v1/models', { token: strangers.key })).status).toBe(200);
      expect((await t.request('DELETE', `/api/orgs/${org3}/members/${stranger.id}`, { token: owner.token })).status).toBe(204);
      expect((await t.request('GET', '/v1/models', { token: strangers.key })).status).toBe(401);
      const actions = (await t.request('GET', `/api/orgs/${orgId}/audit`, { token: owner.token })).body.entries.map((e: { action: string }) => e.action);
      expect(actions.slice(0, 4)).toEqual(['org.key.revoke', 'org.key.create', 'org.key.create', 'org.key.create']);
    });

    test('a member leaves; an admin removes; the audit log has every change for owners', async () => {
      const org2 = (await t.request('POST', '/api/orgs', { token: owner.token, body: { name: 'Second' } })).body.id;
      await join(org2, stranger, 'member');
      expect((await t.request('DELETE', `/api/orgs/${org2}/members/${stranger.id}`, { token: stranger.token })).status).toBe(204);
      expect((await t.request('GET', `/api/orgs/${org2}`, { token: stranger.token })).status).toBe(404);
      const audit = await t.request('GET', `/api/orgs/${org2}/audit`, { token: owner.token });
      expect(audit.status).toBe(200);
      expect(audit.body.entries.map((e: { action: string }) => e.action)).toEqual(['org.member.leave', 'org.invite.accept', 'org.invite', 'org.create']);
      expect(audit.body.entries[0]).toEqual({ id: expect.any(String), actor_email: stranger.email, action: 'org.member.leave', target: org2, details: { user_id: stranger.id, role: 'member' }, created_at: expect.any(String) });
      const platform = await t.services.audit.list({ limit: 200 });
      expect(platform.entries.filter((e) => e.target === org2)).toHaveLength(4);
      expect((await t.request('DELETE', `/api/orgs/${org2}`, { token: owner.token })).status).toBe(204);
      expect((await t.request('GET', `/api/orgs/${org2}`, { token: owner.token })).status).toBe(404);
    });

    test('an organization sends at most 100 invitations a day (each is a mail to any address)', async () => {
      const busy = (await t.request('POST', '/api/orgs', { token: owner.token, body: { name: 'Busy' } })).body.id;
      for (let i = 0; i < 100; i++) {
        expect((await t.request('POST', `/api/orgs/${busy}/invites`, { token: owner.token, body: { email: `guest${i}@example.com`, role: 'member' } })).status).toBe(201);
      }
      const refused = await t.request('POST', `/api/orgs/${busy}/invites`, { token: owner.token, body: { email: 'one-more@example.com', role: 'member' } });
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ error: 'an organization may send 100 invitations a day' });
    });

    test('bad input is 400 with an error; unknown ids are 404; nothing is 500', async () => {
      for (const body of [{}, { name: '' }, { name: 'n'.repeat(101) }, { name: 5 }, '{"name":', []]) {
        const res = await t.request('POST', '/api/orgs', { token: owner.token, body });
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      for (const body of [{}, { email: 'nope', role: 'member' }, { email: 'a@b.example', role: 'king' }]) {
        expect((await t.request('POST', `/api/orgs/${orgId}/invites`, { token: owner.token, body })).status).toBe(400);
      }
      for (const body of [{}, { spend_limit: -1 }, { spend_limit: 0.0000001 }, { spend_period: 'week' }, { role: 'king' }, { spend_limit: null, spend_period: 'day' }]) {
        const res = await t.request('PATCH', `/api/orgs/${orgId}/members/${member.id}`, { token: owner.token, body });
        expect(res.status).toBe(400);
      }
      expect((await t.request('POST', '/api/orgs/invites/accept', { token: owner.token, body: { token: 'nope' } })).status).toBe(400);
      expect((await t.request('GET', '/api/orgs/org_missing', { token: owner.token })).status).toBe(404);
      expect((await t.request('PATCH', `/api/orgs/${orgId}/members/usr_missing`, { token: owner.token, body: { role: 'member' } })).status).toBe(404);
      expect((await t.request('DELETE', `/api/orgs/${orgId}/members/usr_missing`, { token: owner.token })).status).toBe(404);
      expect((await t.request('GET', '/api/orgs')).status).toBe(401);
    });
  });
}

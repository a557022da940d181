/** /api/orgs: organizations, their members, invitations and audit log (signed-in accounts only). */
import { Elysia } from 'elysia';
import type { authPlugin, Caller } from '../../platform/http/auth';
import type { OrgsService } from './orgs.service';
import * as s from './orgs.schemas';

const actorOf = (caller: Caller) => ({ userId: caller.userId, email: caller.email });

export const orgsRoutes = ({ auth, orgs }: { auth: ReturnType<typeof authPlugin>; orgs: OrgsService }) =>
  new Elysia({ name: 'cpd/orgs', detail: { tags: ['organizations'] } })
    .use(auth)
    .post(
      '/api/orgs',
      async ({ caller, body, set }) => {
        set.status = 201;
        return orgs.create(actorOf(caller), body.name);
      },
      { auth: ['session'], body: s.OrgBody, response: { 201: s.Org }, detail: { summary: 'Create an organization (you become its owner)' } },
    )
    .get('/api/orgs', ({ caller }) => orgs.list(caller.userId), { auth: ['session'], response: { 200: s.OrgList }, detail: { summary: 'Your organizations' } })
    .post('/api/orgs/invites/accept', ({ caller, body }) => orgs.accept(actorOf(caller), body.token), {
      auth: ['session'],
      body: s.AcceptBody,
      response: { 200: s.Org },
      detail: { summary: "Accept an invitation: you join with the invite's role" },
    })
    .get('/api/orgs/:id', ({ caller, params }) => orgs.get(caller.userId, params.id), { auth: ['session'], params: s.OrgParams, response: { 200: s.Org }, detail: { summary: 'One of your organizations' } })
    .patch('/api/orgs/:id', ({ caller, params, body }) => orgs.rename(actorOf(caller), params.id, body.name), {
      auth: ['session'],
      params: s.OrgParams,
      body: s.OrgBody,
      response: { 200: s.Org },
      detail: { summary: 'Rename an organization (owners and admins)' },
    })
    .delete(
      '/api/orgs/:id',
      async ({ caller, params, set }) => {
        await orgs.remove(actorOf(caller), params.id);
        set.status = 204;
      },
      { auth: ['session'], params: s.OrgParams, detail: { summary: 'Delete an organization with an empty wallet (owners); revokes its keys' } },
    )
    .get('/api/orgs/:id/members', ({ caller, params }) => orgs.members(caller.userId, params.id), {
      auth: ['session'],
      params: s.OrgParams,
      response: { 200: s.MemberList },
      detail: { summary: 'Members, their roles, caps and spend' },
    })
    .patch('/api/orgs/:id/members/:user_id', ({ caller, params, body }) => orgs.updateMember(actorOf(caller), params.id, params.user_id, body), {
      auth: ['session'],
      params: s.MemberParams,
      body: s.MemberPatch,
      response: { 200: s.Member },
      detail: { summary: "Change a member's role or spend cap (owners and admins; only owners touch owners)" },
    })
    .delete(
      '/api/orgs/:id/members/:user_id',
      async ({ caller, params, set }) => {
        await orgs.removeMember(actorOf(caller), params.id, params.user_id);
        set.status = 204;
      },
      { auth: ['session'], params: s.MemberParams, detail: { summary: "Remove a member, or leave (your own id); revokes the member's keys of it" } },
    )
    .post(
      '/api/orgs/:id/invites',
      async ({ caller, params, body, set }) => {
        set.status = 201;
        return orgs.invite(actorOf(caller), params.id, body);
      },
      { auth: ['session'], params: s.OrgParams, body: s.InviteBody, response: { 201: s.Invite }, detail: { summary: 'Invite an address (mailed; the link is in the answer when mail is off)' } },
    )
    .get('/api/orgs/:id/invites', ({ caller, params }) => orgs.invites(caller.userId, params.id), {
      auth: ['session'],
      params: s.OrgParams,
      response: { 200: s.InviteList },
      detail: { summary: 'Pending invitations (owners and admins)' },
    })
    .delete(
      '/api/orgs/:id/invites/:invite_id',
      async ({ caller, params, set }) => {
        await orgs.revokeInvite(actorOf(caller), params.id, params.invite_id);
        set.status = 204;
      },
      { auth: ['session'], params: s.InviteParams, detail: { summary: 'Withdraw a pending invitation' } },
    )
    .get('/api/orgs/:id/audit', ({ caller, params, query }) => orgs.auditLog(caller.userId, params.id, query), {
      auth: ['session'],
      params: s.OrgParams,
      query: s.AuditQuery,
      response: { 200: s.AuditList },
      detail: { summary: "The organization's audit log (owners and admins)" },
    });

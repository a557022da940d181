/** Request and response schemas of /api/orgs. */
import { t } from 'elysia';

const name = t.String({ minLength: 1, maxLength: 100 });
const id = t.String({ minLength: 1, maxLength: 64 });
const role = t.Union([t.Literal('owner'), t.Literal('admin'), t.Literal('member')]);
const period = t.Union([t.Literal('day'), t.Literal('month'), t.Literal('total')]);

export const OrgBody = t.Object({ name });
export const OrgParams = t.Object({ id });
export const MemberParams = t.Object({ id, user_id: id });
export const InviteParams = t.Object({ id, invite_id: id });
export const InviteBody = t.Object({
  email: t.String({ format: 'email', maxLength: 128 }),
  role: t.Union([t.Literal('owner'), t.Literal('admin'), t.Literal('member')], { description: 'only owners may invite an owner' }),
});
export const AcceptBody = t.Object({ token: t.String({ minLength: 1, maxLength: 128 }) });
export const MemberPatch = t.Object(
  {
    role: t.Optional(role),
    spend_limit: t.Optional(t.Nullable(t.Number({ minimum: 0, description: "major units of the site currency, at most 6 decimals: what the member's keys may spend per period; null: no cap" }))),
    spend_period: t.Optional(t.Nullable(period)),
  },
  { minProperties: 1, description: 'the fields to change' },
);
export const AuditQuery = t.Object({ limit: t.Optional(t.Integer({ minimum: 1, maximum: 200, default: 50 })), cursor: t.Optional(t.String({ minLength: 1 })) });

export const Org = t.Object({ id: t.String(), name: t.String(), currency: t.String(), role, member_count: t.Integer(), created_at: t.String() });
export const OrgList = t.Object({ orgs: t.Array(Org) });
export const Member = t.Object({
  user_id: t.String(),
  email: t.Nullable(t.String()),
  role,
  spend_limit: t.Nullable(t.String()),
  spend_period: t.Nullable(period),
  spent: t.String({ description: 'spent in the current period (all time when there is no period)' }),
  joined_at: t.String(),
});
export const MemberList = t.Object({ members: t.Array(Member) });
export const Invite = t.Object({
  id: t.String(),
  email: t.String(),
  role,
  status: t.Union([t.Literal('pending'), t.Literal('accepted'), t.Literal('revoked'), t.Literal('expired')]),
  expires_at: t.String(),
  created_at: t.String(),
  link: t.Optional(t.String({ description: 'the invitation link, when no mail is configured (give it to the invitee yourself)' })),
});
export const InviteList = t.Object({ invites: t.Array(Invite) });
export const AuditList = t.Object({
  entries: t.Array(t.Object({ id: t.String(), actor_email: t.Nullable(t.String()), action: t.String(), target: t.String(), details: t.Record(t.String(), t.Unknown()), created_at: t.String() })),
  next_cursor: t.Nullable(t.String()),
});

/**
 * An organization's page: its name (renamed by owners and admins), its members with their roles and
 * spend limits (changed or removed by owners and admins; only owners touch owners), the invites,
 * the low-balance mail threshold (owners and admins), and leaving or, for an owner, deleting it.
 */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { ApiError, api } from '../api';
import { currency, formatTime, t } from '../locale';
import { useMe } from '../me';
import { formatMoney, microsToNumber, parseAmount } from '../money';
import { type Org, type OrgRole, assignableRoles, managesOrg, roleName, useOrg, useOrgPage } from '../org';
import { Alert, ConfirmButton, DataTable, Dialog, Field, Page, Select, Show, Status, errorText, useGet } from '../ui';
import { Invites } from './org-invites';
import { OrgNotifications } from './org-notifications';

type Period = 'day' | 'month' | 'total';

export interface Member {
  user_id: string;
  /** null: an account with a phone number only. */
  email: string | null;
  role: OrgRole;
  spend_limit: string | number | null;
  spend_period: Period | null;
  spent: string | number;
  joined_at: string;
}

/** The two refusals a person can run into here, said in the page's language; others as the API words them. */
function orgError(err: unknown): string {
  if (err instanceof ApiError && err.status === 409)
    return err.message.includes('owner')
      ? t('orgs.needsOwner')
      : err.message.includes('wallet')
        ? t('orgs.walletNotEmpty')
        : errorText(err);
  return errorText(err);
}

/** How a member is named: its email, or its id for an account with a phone number only. */
export const memberName = (m: Member) => m.email ?? m.user_id;

const orgPath = (id: string) => `/api/orgs/${encodeURIComponent(id)}`;

/** "$0.40 / $5.00 per month", or "$0.40 · no limit". */
function spendOf(member: Member): string {
  const spent = formatMoney(Number(member.spent), currency);
  if (member.spend_limit === null) return `${spent} · ${t('orgs.noLimit')}`;
  return `${spent} / ${formatMoney(Number(member.spend_limit), currency)} ${t(`keys.period.${member.spend_period ?? 'total'}`)}`;
}

export function OrgSettings({ id }: { id: string }) {
  useOrgPage(id);
  const org = useGet<Org>(orgPath(id));
  return <Show loaded={org}>{(o) => <OrgPage org={o} onChanged={org.reload} />}</Show>;
}

function OrgPage({ org, onChanged }: { org: Org; onChanged: () => void }) {
  const members = useGet<{ members: Member[] }>(`${orgPath(org.id)}/members`);
  const manager = managesOrg(org);
  return (
    <Page title={org.name}>
      <dl class="facts">
        <dt>{t('orgs.yourRole')}</dt>
        <dd data-testid="org-role">{roleName(org.role)}</dd>
        <dt>{t('orgs.currency')}</dt>
        <dd>{org.currency}</dd>
        <dt>{t('created')}</dt>
        <dd>{formatTime(org.created_at)}</dd>
      </dl>
      {manager && (
        <p class="actions">
          <a href={`/console/orgs/${encodeURIComponent(org.id)}/audit`}>{t('orgs.audit.title')}</a>
        </p>
      )}
      {manager && <Rename org={org} onRenamed={onChanged} />}
      <section aria-labelledby="members">
        <h2 id="members">{t('orgs.members')}</h2>
        <Show loaded={members}>{({ members: list }) => <Members org={org} members={list} onChanged={members.reload} />}</Show>
      </section>
      {manager && <Invites org={org} />}
      {manager && <OrgNotifications org={org} />}
      <Leave org={org} />
    </Page>
  );
}

function Rename({ org, onRenamed }: { org: Org; onRenamed: () => void }) {
  const { reload } = useOrg();
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const name = String(new FormData(e.currentTarget as HTMLFormElement).get('name') ?? '').trim();
    setSaved(false);
    if (!name) return setError(t('required'));
    try {
      await api('PATCH', orgPath(org.id), { name });
      setError(null);
      setSaved(true);
      onRenamed();
      reload();
    } catch (err) {
      setError(orgError(err));
    }
  }
  return (
    <form class="inline" onSubmit={submit} noValidate aria-label={t('orgs.rename')}>
      <Field label={t('orgs.name')} name="name" maxLength={100} defaultValue={org.name} error={error} />
      <button type="submit">{t('orgs.rename')}</button>
      {saved && <Status>{t('saved')}</Status>}
    </form>
  );
}

function Members({ org, members, onChanged }: { org: Org; members: Member[]; onChanged: () => void }) {
  const me = useMe();
  const [editing, setEditing] = useState<Member | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Admins manage admins and members; only owners manage owners.
  const mayEdit = (m: Member) => managesOrg(org) && (org.role === 'owner' || m.role !== 'owner');
  // One's own role and cap are changed here too; leaving is below.
  const mayRemove = (m: Member) => mayEdit(m) && m.user_id !== me.id;

  async function remove(member: Member) {
    try {
      await api('DELETE', `${orgPath(org.id)}/members/${encodeURIComponent(member.user_id)}`);
      setError(null);
      onChanged();
    } catch (err) {
      setError(orgError(err));
    }
  }

  return (
    <>
      <Alert>{error}</Alert>
      <DataTable
        rows={members}
        empty={t('none')}
        data-testid="members"
        head={
          <>
            <th>{t('email')}</th>
            <th>{t('orgs.role')}</th>
            <th>{t('orgs.spend')}</th>
            <th>{t('orgs.joined')}</th>
            <th>
              <span class="visually-hidden">{t('actions')}</span>
            </th>
          </>
        }
        row={(m) => (
          <tr key={m.user_id}>
            <td>
              {memberName(m)}
              {m.user_id === me.id && ` (${t('orgs.you')})`}
            </td>
            <td>{roleName(m.role)}</td>
            <td>{spendOf(m)}</td>
            <td>{formatTime(m.joined_at)}</td>
            <td class="nowrap">
              {mayEdit(m) && (
                <button type="button" aria-label={t('orgs.editNamed', { email: memberName(m) })} onClick={() => setEditing(m)}>
                  {t('orgs.edit')}
                </button>
              )}{' '}
              {mayRemove(m) && (
                <ConfirmButton
                  label={t('orgs.remove')}
                  aria-label={t('orgs.removeNamed', { email: memberName(m) })}
                  question={t('orgs.confirmRemove', { email: memberName(m), org: org.name })}
                  confirmLabel={t('orgs.remove')}
                  onConfirm={() => remove(m)}
                />
              )}
            </td>
          </tr>
        )}
      />
      <Dialog
        open={editing !== null}
        title={t('orgs.editNamed', { email: editing ? memberName(editing) : '' })}
        onClose={() => setEditing(null)}
      >
        {editing && (
          <EditMember
            key={editing.user_id}
            org={org}
            member={editing}
            onSaved={() => {
              setEditing(null);
              onChanged();
            }}
          />
        )}
      </Dialog>
    </>
  );
}

/** A member's role and spend limit; an empty limit removes it. */
function EditMember({ org, member, onSaved }: { org: Org; member: Member; onSaved: () => void }) {
  const [errors, setErrors] = useState<{ spend_limit?: string; role?: string }>({});
  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const raw = String(form.get('spend_limit') ?? '').trim();
    const micros = raw === '' ? null : parseAmount(raw, 6);
    if (raw !== '' && micros === null) return setErrors({ spend_limit: t('keys.badAmount') });
    const role = String(form.get('role')) as OrgRole;
    const body = {
      ...(role !== member.role ? { role } : {}),
      spend_limit: micros === null ? null : microsToNumber(micros),
      spend_period: micros === null ? null : String(form.get('spend_period')),
    };
    try {
      await api('PATCH', `${orgPath(org.id)}/members/${encodeURIComponent(member.user_id)}`, body);
      onSaved();
    } catch (err) {
      const message = orgError(err);
      setErrors(message.includes('spend') ? { spend_limit: message } : { role: message });
    }
  }
  return (
    <form onSubmit={submit} noValidate aria-label={t('orgs.editNamed', { email: memberName(member) })}>
      <Select label={t('orgs.role')} name="role" value={member.role} options={assignableRoles(org.role).map((r) => [r, roleName(r)])} />
      <Alert>{errors.role}</Alert>
      <Field
        label={t('orgs.spendLimit', { currency })}
        name="spend_limit"
        inputMode="decimal"
        defaultValue={member.spend_limit === null ? '' : String(Number(member.spend_limit))}
        hint={t('orgs.spendLimitHint')}
        error={errors.spend_limit}
      />
      <Select
        label={t('keys.spendPeriod')}
        name="spend_period"
        value={member.spend_period ?? 'month'}
        options={(['day', 'month', 'total'] as const).map((p) => [p, t(`keys.period.${p}`)])}
      />
      <button type="submit" class="primary">
        {t('save')}
      </button>
    </form>
  );
}

/** Leaving (any member; the last owner is refused), and deleting the organization (owners, with an empty wallet). */
function Leave({ org }: { org: Org }) {
  const me = useMe();
  const { leave } = useOrg();
  const { route } = useLocation();
  const [error, setError] = useState<string | null>(null);
  async function gone(request: Promise<unknown>) {
    try {
      await request;
      leave(org.id);
      route('/console');
    } catch (err) {
      setError(orgError(err));
    }
  }
  return (
    <section aria-labelledby="leave">
      <h2 id="leave">{t('orgs.leaveTitle')}</h2>
      <Alert>{error}</Alert>
      <p class="actions">
        <ConfirmButton
          label={t('orgs.leave')}
          question={t('orgs.confirmLeave', { org: org.name })}
          confirmLabel={t('orgs.leave')}
          onConfirm={() => gone(api('DELETE', `${orgPath(org.id)}/members/${encodeURIComponent(me.id)}`))}
        />
        {org.role === 'owner' && (
          <ConfirmButton
            label={t('orgs.delete')}
            question={t('orgs.confirmDelete', { org: org.name })}
            confirmLabel={t('orgs.delete')}
            onConfirm={() => gone(api('DELETE', orgPath(org.id)))}
          />
        )}
      </p>
    </section>
  );
}

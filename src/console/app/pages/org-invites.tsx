/**
 * Invites: owners and admins invite by email with a role, see the pending ones and revoke them. The
 * link is mailed; a site without mail hands it back to the inviter, who copies it from here. The
 * invited person opens it at /console/invite (signing in or up first) and joins.
 */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { ApiError, api } from '../api';
import { formatTime, t } from '../locale';
import { useMe } from '../me';
import { type Org, type OrgRole, assignableRoles, roleName, useOrg } from '../org';
import { Alert, ConfirmButton, CopyButton, DataTable, Field, Page, Select, Show, Status, errorText, useGet } from '../ui';

interface Invite {
  id: string;
  email: string;
  role: OrgRole;
  status: 'pending' | 'accepted' | 'revoked' | 'expired';
  expires_at: string;
  created_at: string;
  link?: string;
}

export function Invites({ org }: { org: Org }) {
  const path = `/api/orgs/${encodeURIComponent(org.id)}/invites`;
  const invites = useGet<{ invites: Invite[] }>(path);
  const [error, setError] = useState<string | null>(null);
  const [sent, setSent] = useState<Invite | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const email = String(data.get('email') ?? '').trim();
    if (!/^[^\s@]+@[^\s@]+$/.test(email)) return setError(t('signup.badEmail'));
    setBusy(true);
    try {
      setSent(await api<Invite>('POST', path, { email, role: String(data.get('role')) }));
      setError(null);
      form.reset();
      invites.reload();
    } catch (err) {
      setError(err instanceof ApiError && err.status === 429 ? t('orgs.tooManyInvites') : errorText(err));
    } finally {
      setBusy(false);
    }
  }

  async function revoke(invite: Invite) {
    try {
      await api('DELETE', `${path}/${encodeURIComponent(invite.id)}`);
      if (sent?.id === invite.id) setSent(null);
      invites.reload();
    } catch (err) {
      setError(errorText(err));
    }
  }

  return (
    <section aria-labelledby="invites">
      <h2 id="invites">{t('orgs.invites')}</h2>
      <form class="inline" onSubmit={submit} noValidate aria-label={t('orgs.invite')}>
        <Field label={t('email')} name="email" type="email" autocomplete="off" error={error} />
        <Select label={t('orgs.role')} name="role" value="member" options={assignableRoles(org.role).map((r) => [r, roleName(r)])} />
        <button type="submit" disabled={busy}>
          {t('orgs.invite')}
        </button>
      </form>
      {sent &&
        (sent.link ? (
          <div class="notice" role="status">
            <p>{t('orgs.inviteLink', { email: sent.email })}</p>
            <code data-testid="invite-link">{sent.link}</code> <CopyButton text={sent.link} label={t('orgs.copyLink')} />
          </div>
        ) : (
          <Status>{t('orgs.inviteMailed', { email: sent.email })}</Status>
        ))}
      <h3>{t('orgs.pending')}</h3>
      <Show loaded={invites}>
        {({ invites: list }) => (
          <DataTable
            rows={list.filter((i) => i.status === 'pending')}
            empty={t('orgs.noInvites')}
            data-testid="invites"
            head={
              <>
                <th>{t('email')}</th>
                <th>{t('orgs.role')}</th>
                <th>{t('orgs.expires')}</th>
                <th>
                  <span class="visually-hidden">{t('actions')}</span>
                </th>
              </>
            }
            row={(i) => (
              <tr key={i.id}>
                <td>{i.email}</td>
                <td>{roleName(i.role)}</td>
                <td>{formatTime(i.expires_at)}</td>
                <td>
                  <ConfirmButton
                    label={t('orgs.revoke')}
                    aria-label={t('orgs.revokeNamed', { email: i.email })}
                    question={t('orgs.confirmRevoke', { email: i.email })}
                    confirmLabel={t('orgs.revoke')}
                    onConfirm={() => revoke(i)}
                  />
                </td>
              </tr>
            )}
          />
        )}
      </Show>
    </section>
  );
}

/**
 * /console/invite?token=…: the invited person, signed in (the server sends a visitor to sign in
 * and back here first), joins with one button and the console switches to the organization.
 */
export function AcceptInvite() {
  const me = useMe();
  const { enter } = useOrg();
  const { route } = useLocation();
  const token = new URLSearchParams(location.search).get('token') ?? '';
  const [error, setError] = useState<string | null>(token ? null : t('orgs.accept.invalid'));
  const [busy, setBusy] = useState(false);

  async function accept() {
    setBusy(true);
    try {
      const org = await api<Org>('POST', '/api/orgs/invites/accept', { token });
      enter(org);
      route(`/console/orgs/${encodeURIComponent(org.id)}`);
    } catch (err) {
      setError(err instanceof ApiError && err.status === 400 ? t('orgs.accept.invalid') : errorText(err));
      setBusy(false);
    }
  }

  return (
    <Page title={t('orgs.accept.title')}>
      {error ? (
        <Alert>{error}</Alert>
      ) : (
        <>
          <p>{t('orgs.accept.intro', { account: me.email ?? me.phone ?? '' })}</p>
          <p>
            <button type="button" class="primary" disabled={busy} onClick={accept}>
              {t('orgs.accept.submit')}
            </button>
          </p>
        </>
      )}
      <p>
        <a href="/console">{t('orgs.accept.toConsole')}</a>
      </p>
    </Page>
  );
}

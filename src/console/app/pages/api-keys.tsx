/**
 * API keys: create with limits in a dialog (the full key is shown once there, with a copy button), list
 * with the spend so far, edit or clear a key's limits, revoke after a confirmation.
 */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api';
import { currency, formatTime, t } from '../locale';
import { formatMoney } from '../money';
import { managesOrg, orgQuery, useOrg } from '../org';
import { ConfirmButton, CopyButton, DataTable, Dialog, errorText, Field, Page, Show, useGet } from '../ui';
import { errorsFromApi, type KeyLimits, type LimitErrors, LimitFields, readLimits } from './key-limits';
import { CaptureCheckbox, captureOf } from './key-capture';
import { type Member, memberName } from './org-settings';

interface ApiKey extends KeyLimits {
  id: string;
  prefix: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  spent?: number | null;
  capture?: boolean;
  created_by?: string;
}

function limitsOf(key: ApiKey): string {
  const parts: string[] = [];
  if (key.models?.length) parts.push(key.models.join(', '));
  if (key.spend_limit != null)
    parts.push(
      `${formatMoney(key.spent ?? 0, currency)} / ${formatMoney(key.spend_limit, currency)} ${t(`keys.period.${key.spend_period ?? 'total'}` as 'keys.period.total')}`,
    );
  if (key.rpm != null) parts.push(t('keys.rpm', { rpm: key.rpm }));
  if (key.expires_at) parts.push(t('keys.expires', { time: formatTime(key.expires_at) }));
  if (key.capture) parts.push(t('captures.captured'));
  return parts.join(' · ') || '—';
}

export function ApiKeys() {
  const { current: org } = useOrg();
  const keys = useGet<ApiKey[]>(withQuery('/api/api-keys', orgQuery(org)));
  // Owners and admins see every member's keys of the organization, so the list says whose each is.
  const members = useGet<{ members: Member[] }>(org && managesOrg(org) ? `/api/orgs/${encodeURIComponent(org.id)}/members` : null);
  const emailOf = new Map(members.data?.members.map((m) => [m.user_id, memberName(m)]));
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<(ApiKey & { key: string }) | null>(null);
  const [errors, setErrors] = useState<LimitErrors>({});
  const [editing, setEditing] = useState<ApiKey | null>(null);
  const [editErrors, setEditErrors] = useState<LimitErrors>({});
  const pricing = useGet<{ models: Array<{ slug: string }> }>('/api/pricing');
  const pricedModels = [...new Set(pricing.data?.models.map((m) => m.slug) ?? [])];

  async function create(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const name = String(data.get('name') ?? '').trim();
    if (!name) return setErrors({ name: t('required') });
    const read = readLimits(data, false);
    if ('errors' in read) return setErrors(read.errors);
    setErrors({});
    try {
      setCreated(
        await api<ApiKey & { key: string }>('POST', '/api/api-keys', { name, ...read.limits, capture: captureOf(data), ...orgQuery(org) }),
      );
      keys.reload();
    } catch (err) {
      setErrors(errorsFromApi(errorText(err)));
    }
  }

  async function saveLimits(e: Event) {
    e.preventDefault();
    if (!editing) return;
    const data = new FormData(e.currentTarget as HTMLFormElement);
    const read = readLimits(data, true);
    if ('errors' in read) return setEditErrors(read.errors);
    setEditErrors({});
    try {
      await api('PATCH', `/api/api-keys/${encodeURIComponent(editing.id)}`, { ...read.limits, capture: captureOf(data) });
      setEditing(null);
      keys.reload();
    } catch (err) {
      setEditErrors(errorsFromApi(errorText(err)));
    }
  }

  function openCreate() {
    setErrors({});
    setCreated(null);
    setCreating(true);
  }

  async function revoke(key: ApiKey) {
    await api('DELETE', `/api/api-keys/${encodeURIComponent(key.id)}`);
    keys.reload();
  }

  return (
    <Page title={t('keys.title')}>
      {org && <p data-testid="keys-org">{t('orgs.keysOf', { org: org.name })}</p>}
      <p>
        <button type="button" onClick={openCreate}>
          {t('keys.create')}
        </button>
      </p>
      <Dialog open={creating} title={t('keys.create')} onClose={() => setCreating(false)}>
        {created ? (
          <div class="notice" role="status">
            <p>{t('keys.once')}</p>
            <code data-testid="new-key">{created.key}</code> <CopyButton text={created.key} label={t('keys.copy')} />
          </div>
        ) : (
          <form onSubmit={create} noValidate aria-label={t('keys.create')}>
            <Field label={t('keys.name')} name="name" maxLength={100} error={errors.name} />
            <LimitFields errors={errors} models={pricedModels} />
            <CaptureCheckbox />
            <button type="submit">{t('keys.create')}</button>
          </form>
        )}
      </Dialog>
      <Show loaded={keys}>
        {(list) => (
          <DataTable
            rows={list}
            empty={t('keys.none')}
            head={
              <>
                <th>{t('keys.name')}</th>
                <th>{t('keys.prefix')}</th>
                <th>{t('keys.limits')}</th>
                {members.data && <th>{t('orgs.createdBy')}</th>}
                <th>{t('created')}</th>
                <th>{t('keys.lastUsed')}</th>
                <th>
                  <span class="visually-hidden">{t('actions')}</span>
                </th>
              </>
            }
            row={(key) => (
              <tr key={key.id}>
                <td>{key.name}</td>
                <td>
                  <code>{key.prefix}…</code>
                </td>
                <td>{limitsOf(key)}</td>
                {members.data && <td>{(key.created_by && emailOf.get(key.created_by)) ?? key.created_by ?? '—'}</td>}
                <td>{formatTime(key.created_at)}</td>
                <td>{formatTime(key.last_used_at)}</td>
                <td>
                  <button
                    type="button"
                    onClick={() => {
                      setEditErrors({});
                      setEditing(key);
                    }}
                    aria-label={t('keys.editNamed', { name: key.name })}
                  >
                    {t('keys.edit')}
                  </button>{' '}
                  <ConfirmButton
                    label={t('keys.revoke')}
                    aria-label={t('keys.revokeNamed', { name: key.name })}
                    question={t('keys.confirmRevoke', { name: key.name })}
                    confirmLabel={t('keys.revoke')}
                    onConfirm={() => revoke(key)}
                  />
                </td>
              </tr>
            )}
          />
        )}
      </Show>
      {editing && (
        <form key={editing.id} onSubmit={saveLimits} noValidate aria-label={t('keys.editNamed', { name: editing.name })}>
          <h2>{t('keys.editNamed', { name: editing.name })}</h2>
          <p class="hint">{t('keys.clearHint')}</p>
          <LimitFields current={editing} errors={editErrors} models={pricedModels} />
          <CaptureCheckbox checked={editing.capture} />
          <button type="submit">{t('save')}</button>{' '}
          <button type="button" onClick={() => setEditing(null)}>
            {t('keys.cancel')}
          </button>
        </form>
      )}
    </Page>
  );
}

/**
 * API keys: create (the full key is shown once, with a copy button), list, revoke. Limits
 * (models, spend limit and period, expiry, requests per minute) are shown when the server
 * reports them on its keys.
 */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { currency, formatTime, t } from '../locale';
import { formatMoney } from '../money';
import { CopyButton, Field, Page, Show, errorText, useGet } from '../ui';

interface ApiKey {
  id: string;
  prefix: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  models?: string[] | null;
  spend_limit?: number | null;
  spend_period?: string | null;
  spent?: number | null;
  expires_at?: string | null;
  rpm?: number | null;
}

function limitsOf(key: ApiKey): string {
  const parts: string[] = [];
  if (key.models?.length) parts.push(key.models.join(', '));
  if (key.spend_limit != null)
    parts.push(`${formatMoney(key.spent ?? 0, currency)} / ${formatMoney(key.spend_limit, currency)} ${key.spend_period ?? ''}`);
  if (key.rpm != null) parts.push(t('keys.rpm', { rpm: key.rpm }));
  if (key.expires_at) parts.push(t('keys.expires', { time: formatTime(key.expires_at) }));
  return parts.join(' · ') || '—';
}

export function ApiKeys() {
  const keys = useGet<ApiKey[]>('/api/api-keys');
  const [created, setCreated] = useState<(ApiKey & { key: string }) | null>(null);
  const [error, setError] = useState<string | null>(null);

  async function create(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const name = String(new FormData(form).get('name') ?? '').trim();
    if (!name) return setError(t('required'));
    setError(null);
    try {
      setCreated(await api<ApiKey & { key: string }>('POST', '/api/api-keys', { name }));
      form.reset();
      keys.reload();
    } catch (err) {
      setError(errorText(err));
    }
  }

  async function revoke(key: ApiKey) {
    if (!confirm(t('keys.confirmRevoke', { name: key.name }))) return;
    await api('DELETE', `/api/api-keys/${encodeURIComponent(key.id)}`);
    keys.reload();
  }

  return (
    <Page title={t('keys.title')}>
      <form onSubmit={create} noValidate class="inline">
        <Field label={t('keys.name')} name="name" maxLength={100} error={error} />
        <button type="submit">{t('keys.create')}</button>
      </form>
      {created && (
        <div class="notice" role="status">
          <p>{t('keys.once')}</p>
          <code data-testid="new-key">{created.key}</code> <CopyButton text={created.key} label={t('keys.copy')} />
        </div>
      )}
      <Show loaded={keys}>
        {(list) =>
          list.length === 0 ? (
            <p>{t('keys.none')}</p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th>{t('keys.name')}</th>
                  <th>{t('keys.prefix')}</th>
                  <th>{t('keys.limits')}</th>
                  <th>{t('created')}</th>
                  <th>{t('keys.lastUsed')}</th>
                  <th>
                    <span class="visually-hidden">{t('actions')}</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.map((key) => (
                  <tr key={key.id}>
                    <td>{key.name}</td>
                    <td>
                      <code>{key.prefix}…</code>
                    </td>
                    <td>{limitsOf(key)}</td>
                    <td>{formatTime(key.created_at)}</td>
                    <td>{formatTime(key.last_used_at)}</td>
                    <td>
                      <button type="button" onClick={() => revoke(key)} aria-label={t('keys.revokeNamed', { name: key.name })}>
                        {t('keys.revoke')}
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Show>
    </Page>
  );
}

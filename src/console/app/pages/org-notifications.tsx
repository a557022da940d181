/**
 * An organization's low-balance mail threshold (GET/PUT /api/orgs/{id}/notifications), for its owners
 * and admins, who are the ones mailed. Like the personal setting, it is shown only where the site sends mail.
 */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { currency, t } from '../locale';
import type { Org } from '../org';
import { Field, Status, errorText, useGet } from '../ui';

export function OrgNotifications({ org }: { org: Org }) {
  const path = `/api/orgs/${encodeURIComponent(org.id)}/notifications`;
  const site = useGet<{ features: { email: boolean } }>('/api/site');
  const settings = useGet<{ low_balance: string | null }>(path);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  if (!site.data?.features.email || !settings.data) return null;
  async function submit(e: Event) {
    e.preventDefault();
    const raw = String(new FormData(e.currentTarget as HTMLFormElement).get('low_balance') ?? '').trim();
    setSaved(false);
    if (raw !== '' && !/^\d+(\.\d{1,6})?$/.test(raw)) return setError(t('mail.notifications.badAmount'));
    try {
      await api('PUT', path, { low_balance: raw === '' ? null : Number(raw) });
      setError(null);
      setSaved(true);
      settings.reload();
    } catch (err) {
      setError(errorText(err));
    }
  }
  return (
    <form onSubmit={submit} noValidate aria-labelledby="org-notifications">
      <h2 id="org-notifications">{t('mail.notifications.title')}</h2>
      <p>{t('orgs.notifications.intro', { org: org.name })}</p>
      <Field
        label={t('orgs.notifications.lowBalance', { currency })}
        name="low_balance"
        inputMode="decimal"
        defaultValue={settings.data.low_balance === null ? '' : String(Number(settings.data.low_balance))}
        hint={t('mail.notifications.lowBalanceHint')}
        error={error}
      />
      <button type="submit">{t('save')}</button>
      {saved && <Status>{t('saved')}</Status>}
    </form>
  );
}

/** A new organization: its name; the caller becomes its owner and the console switches to it. */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api } from '../api';
import { t } from '../locale';
import { type Org, useOrg } from '../org';
import { Field, Page, errorText } from '../ui';

export function NewOrg() {
  const { enter } = useOrg();
  const { route } = useLocation();
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    const name = String(new FormData(e.currentTarget as HTMLFormElement).get('name') ?? '').trim();
    if (!name) return setError(t('required'));
    setBusy(true);
    try {
      const org = await api<Org>('POST', '/api/orgs', { name });
      enter(org);
      route(`/console/orgs/${encodeURIComponent(org.id)}`);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <Page title={t('orgs.new.title')}>
      <p>{t('orgs.new.intro')}</p>
      <form onSubmit={submit} noValidate aria-label={t('orgs.new.title')}>
        <Field label={t('orgs.name')} name="name" maxLength={100} autocomplete="organization" error={error} />
        <button type="submit" class="primary" disabled={busy}>
          {t('orgs.new.submit')}
        </button>
      </form>
    </Page>
  );
}

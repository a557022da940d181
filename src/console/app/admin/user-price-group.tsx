/** Admin, one user's page: their price group, changed with PATCH /api/admin/users/{id} {price_group}. */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { t } from '../locale';
import { Alert, Select, Show, Status, errorText, useGet } from '../ui';

export function UserPriceGroup({ userId, current, onDone }: { userId: string; current: string; onDone: () => void }) {
  const groups = useGet<{ groups: Array<{ name: string; multiplier: number }> }>('/api/admin/billing/price-groups');
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    setSaved(false);
    try {
      await api('PATCH', `/api/admin/users/${encodeURIComponent(userId)}`, { price_group: String(new FormData(e.currentTarget as HTMLFormElement).get('price_group')) });
      setError(null);
      setSaved(true);
      onDone();
    } catch (err) {
      setError(errorText(err));
    }
  }
  return (
    <form onSubmit={submit} aria-labelledby="price-group-heading">
      <h2 id="price-group-heading">{t('pricing.group')}</h2>
      <Show loaded={groups}>
        {(g) => (
          <Select label={t('pricing.group')} name="price_group" value={current} options={g.groups.map((x) => [x.name, `${x.name} (×${x.multiplier})`])} />
        )}
      </Show>
      <button type="submit">{t('pricing.setGroup')}</button>
      <Alert>{error}</Alert>
      {saved && <Status>{t('saved')}</Status>}
    </form>
  );
}

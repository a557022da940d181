/** Admin: price groups (name, multiplier, description), edited as a table and saved whole (PUT replaces them). */
import { api } from '../api';
import { t } from '../locale';
import { Page, Show, useGet } from '../ui';
import { PriceTable } from './pricing';

interface PriceGroup {
  name: string;
  multiplier: number;
  description: string | null;
}

export function AdminPriceGroups() {
  const groups = useGet<{ groups: PriceGroup[] }>('/api/admin/billing/price-groups');
  return (
    <Page title={t('nav.admin.priceGroups')}>
      <p>{t('groups.intro')}</p>
      <Show loaded={groups}>
        {(g) => (
          <PriceTable
            title={t('nav.admin.priceGroups')}
            columns={[
              { key: 'name', label: t('groups.name') },
              { key: 'multiplier', label: t('groups.multiplier') },
              { key: 'description', label: t('groups.description') },
            ]}
            rows={g.groups.map((r) => ({ name: r.name, multiplier: String(r.multiplier), description: r.description ?? '' }))}
            save={async (rows) => {
              await api('PUT', '/api/admin/billing/price-groups', {
                groups: rows.map((r) => ({ name: r.name!.trim(), multiplier: Number(r.multiplier), description: r.description?.trim() || null })),
              });
              groups.reload();
            }}
          />
        )}
      </Show>
    </Page>
  );
}

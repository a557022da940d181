/** Admin: the cost report (everyone's usage, USD) by user, model or entrypoint over a range, with its daily chart. */
import { useState } from 'preact/hooks';
import { withQuery } from '../api';
import { DailyCostChart, type GroupBy, localDays } from '../cost-chart';
import { formatNumber, t } from '../locale';
import { formatMoney } from '../money';
import { dateInput, rangeQuery } from '../pages/usage';
import { Field, Page, Select, Show, useGet } from '../ui';

type CostRow = { cost_usd: number; tokens: number } & Partial<Record<GroupBy, string>>;

export function AdminCost() {
  const today = new Date();
  const [filters, setFilters] = useState<{ from: string; to: string; groupBy: GroupBy }>({
    from: dateInput(new Date(today.getFullYear(), today.getMonth(), today.getDate() - 29)),
    to: dateInput(today),
    groupBy: 'model',
  });
  const report = useGet<{ items: CostRow[] }>(
    withQuery('/v1/router/cost', { ...rangeQuery(filters.from, filters.to), group_by: filters.groupBy }),
  );
  return (
    <Page title={t('nav.admin.cost')}>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          setFilters({ from: String(f.get('from')), to: String(f.get('to')), groupBy: String(f.get('group_by')) as GroupBy });
        }}
      >
        <Field label={t('from')} name="from" type="date" value={filters.from} required />
        <Field label={t('to')} name="to" type="date" value={filters.to} required />
        <Select
          label={t('admin.groupBy')}
          name="group_by"
          value={filters.groupBy}
          options={(['model', 'user', 'entrypoint'] as const).map((g): [string, string] => [g, t(`chart.by.${g}`)])}
        />
        <button type="submit">{t('apply')}</button>
      </form>
      <Show loaded={report}>
        {({ items }) => (
          <table>
            <thead>
              <tr>
                <th>{t(`chart.by.${filters.groupBy}`)}</th>
                <th class="num">{t('usage.tokens')}</th>
                <th class="num">{t('admin.costUsd')}</th>
              </tr>
            </thead>
            <tbody>
              {items.map((row) => (
                <tr>
                  <td>{row[filters.groupBy] ?? '—'}</td>
                  <td class="num">{formatNumber(row.tokens)}</td>
                  <td class="num">{formatMoney(row.cost_usd, 'USD')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Show>
      <DailyCostChart days={localDays(filters.from, filters.to)} groupBy={filters.groupBy} />
    </Page>
  );
}

/**
 * Usage: the per-request log (GET /api/usage) with filters and cursor pages, a daily cost chart
 * by model over the same days, and the CSV export of those rows.
 */
import { useState } from 'preact/hooks';
import { withQuery } from '../api';
import { DailyCostChart, localDays } from '../cost-chart';
import { formatNumber, formatTime, t } from '../locale';
import { formatMoney } from '../money';
import { BillingOnly, orgQuery, useOrg } from '../org';
import { TokenKinds } from './token-kinds';
import { DataTable, Field, Page, Select, Show, useCursor, useGet } from '../ui';

interface UsageRow {
  id: string;
  created_at: string;
  entrypoint: string;
  model: string;
  key_id: string | null;
  key_name: string | null;
  key_revoked: boolean;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
  cost: number;
  currency: string;
  status: string | number;
  streamed: boolean;
  latency_ms: number;
}

/** YYYY-MM-DD of a local date, as <input type=date> takes it. */
export const dateInput = (d: Date) =>
  `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;

/** The range's local start and end (end: the midnight after `to`) as ISO instants. */
export function rangeQuery(from: string, to: string) {
  const days = localDays(from, to);
  const last = days[days.length - 1] ?? new Date();
  return { from: days[0]?.toISOString(), to: new Date(last.getFullYear(), last.getMonth(), last.getDate() + 1).toISOString() };
}

export const Usage = () => (
  <BillingOnly title={t('nav.usage')}>
    <UsageLog />
  </BillingOnly>
);

function UsageLog() {
  const { current: org } = useOrg();
  const today = new Date();
  const [filters, setFilters] = useState({
    from: dateInput(new Date(today.getFullYear(), today.getMonth(), today.getDate() - 6)),
    to: dateInput(today),
    model: '',
    key_id: '',
  });
  const { cursor, reset, Pager } = useCursor();
  const keys = useGet<Array<{ id: string; name: string }>>(withQuery('/api/api-keys', orgQuery(org)));
  const range = { ...rangeQuery(filters.from, filters.to), ...orgQuery(org) };
  const page = useGet<{ usage: UsageRow[]; next_cursor: string | null }>(
    withQuery('/api/usage', { ...range, model: filters.model, key_id: filters.key_id, limit: 50, cursor }),
  );
  const keyName = (row: UsageRow) =>
    row.key_name === null ? (row.key_id ?? '—') : row.key_revoked ? t('product.revokedKey', { name: row.key_name }) : row.key_name;

  function apply(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    reset();
    setFilters({
      from: String(form.get('from')),
      to: String(form.get('to')),
      model: String(form.get('model') ?? '').trim(),
      key_id: String(form.get('key_id') ?? ''),
    });
  }

  return (
    <Page title={t('nav.usage')}>
      <form class="inline" onSubmit={apply}>
        <Field label={t('from')} name="from" type="date" value={filters.from} required />
        <Field label={t('to')} name="to" type="date" value={filters.to} required />
        <Field label={t('model')} name="model" value={filters.model} />
        <Select
          label={t('usage.key')}
          name="key_id"
          value={filters.key_id}
          options={[['', t('usage.allKeys')], ...(keys.data ?? []).map((k): [string, string] => [k.id, k.name])]}
        />
        <button type="submit">{t('apply')}</button>
        <a class="button" href={withQuery('/api/usage/export.csv', range)} download>
          {t('usage.csv')}
        </a>
      </form>
      <DailyCostChart days={localDays(filters.from, filters.to)} groupBy="model" only={filters.model || undefined} orgId={org?.id} />
      {org && <DailyCostChart days={localDays(filters.from, filters.to)} groupBy="member" orgId={org.id} />}
      <h2>{t('usage.requests')}</h2>
      <Show loaded={page}>
        {({ usage, next_cursor }) => (
          <>
            <DataTable
              rows={usage}
              empty={t('none')}
              data-testid="usage-log"
              head={
                <>
                  <th>{t('time')}</th>
                  <th>{t('model')}</th>
                  <th>{t('usage.entrypoint')}</th>
                  <th>{t('usage.key')}</th>
                  <th class="num">{t('usage.tokens')}</th>
                  <th class="num">{t('usage.cost')}</th>
                  <th>{t('status')}</th>
                  <th class="num">{t('usage.latency')}</th>
                </>
              }
              row={(row) => (
                <tr key={row.id}>
                  <td>{formatTime(row.created_at)}</td>
                  <td>{row.model}</td>
                  <td>{row.entrypoint}</td>
                  <td>{keyName(row)}</td>
                  <td class="num">
                    {formatNumber(row.prompt_tokens)} + {formatNumber(row.completion_tokens)}
                    <TokenKinds cached={row.cached_tokens} reasoning={row.reasoning_tokens} />
                  </td>
                  <td class="num">{formatMoney(row.cost, row.currency)}</td>
                  <td>
                    {row.status}
                    {row.streamed ? ` · ${t('usage.streamed')}` : ''}
                  </td>
                  <td class="num">{formatNumber(row.latency_ms)} ms</td>
                </tr>
              )}
            />
            <Pager next={next_cursor} />
          </>
        )}
      </Show>
    </Page>
  );
}

/** Admin: the model and GPU price lists, edited as tables and saved whole (each PUT replaces its list). */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { currency, t } from '../locale';
import { Alert, Page, Show, Status, errorText, useGet } from '../ui';

interface ModelPrice {
  slug: string;
  unit: string;
  price: number;
}
interface GpuPrice {
  name: string;
  hourly_price: number;
}
type Row = Record<string, string>;

/** Each price is kept as the typed text and sent as a number; the server refuses more than 6 decimals. */
function PriceTable({
  title,
  columns,
  rows: initial,
  save,
}: {
  title: string;
  columns: Array<{ key: string; label: string; options?: string[] }>;
  rows: Row[];
  save: (rows: Row[]) => Promise<void>;
}) {
  const [rows, setRows] = useState(initial);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => setRows(initial), [initial]);
  const edit = (i: number, key: string, value: string) => setRows(rows.map((r, j) => (j === i ? { ...r, [key]: value } : r)));
  return (
    <form
      aria-label={title}
      onSubmit={async (e) => {
        e.preventDefault();
        setSaved(false);
        try {
          await save(rows);
          setError(null);
          setSaved(true);
        } catch (err) {
          setError(errorText(err));
        }
      }}
    >
      <h2>{title}</h2>
      <table>
        <thead>
          <tr>
            {columns.map((c) => (
              <th>{c.label}</th>
            ))}
            <th>
              <span class="visually-hidden">{t('actions')}</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row, i) => (
            <tr>
              {columns.map((c) => (
                <td>
                  {c.options ? (
                    <select aria-label={`${c.label} ${i + 1}`} value={row[c.key]} onChange={(e) => edit(i, c.key, e.currentTarget.value)}>
                      {c.options.map((o) => (
                        <option value={o}>{o}</option>
                      ))}
                    </select>
                  ) : (
                    <input aria-label={`${c.label} ${i + 1}`} value={row[c.key]} onInput={(e) => edit(i, c.key, e.currentTarget.value)} />
                  )}
                </td>
              ))}
              <td>
                <button type="button" onClick={() => setRows(rows.filter((_, j) => j !== i))}>
                  {t('admin.removeRow')}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="actions">
        <button type="button" onClick={() => setRows([...rows, Object.fromEntries(columns.map((c) => [c.key, c.options?.[0] ?? '']))])}>
          {t('admin.addRow')}
        </button>
        <button type="submit">{t('save')}</button>
      </p>
      <Alert>{error}</Alert>
      {saved && <Status>{t('saved')}</Status>}
    </form>
  );
}

export function AdminPricing() {
  const pricing = useGet<{ models: ModelPrice[]; gpus: GpuPrice[] }>('/api/pricing');
  const price = t('admin.price', { currency });
  return (
    <Page title={t('nav.admin.pricing')}>
      <Show loaded={pricing}>
        {(p) => (
          <>
            <PriceTable
              title={t('admin.modelPrices')}
              columns={[
                { key: 'slug', label: t('model') },
                { key: 'unit', label: t('admin.unit'), options: ['per_million_tokens', 'per_request'] },
                { key: 'price', label: price },
              ]}
              rows={p.models.map((m) => ({ slug: m.slug, unit: m.unit, price: String(m.price) }))}
              save={(rows) =>
                api('PUT', '/api/admin/billing/pricing/models', {
                  models: rows.map((r) => ({ slug: r.slug!.trim(), unit: r.unit, price: Number(r.price) })),
                })
              }
            />
            <PriceTable
              title={t('admin.gpuPrices')}
              columns={[
                { key: 'name', label: t('admin.gpu') },
                { key: 'hourly_price', label: t('admin.hourly', { currency }) },
              ]}
              rows={p.gpus.map((g) => ({ name: g.name, hourly_price: String(g.hourly_price) }))}
              save={(rows) =>
                api('PUT', '/api/admin/billing/pricing/gpus', {
                  gpus: rows.map((r) => ({ name: r.name!.trim(), hourly_price: Number(r.hourly_price) })),
                })
              }
            />
          </>
        )}
      </Show>
    </Page>
  );
}

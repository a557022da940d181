/**
 * The model catalog with a download link per quantization, for the model's newest SDK. The
 * session cookie authenticates the link (a directory bundle arrives as a ZIP stream), so no
 * token appears in the URL or the browser's history. Each model's gateway price (GET /api/pricing) sits beside it.
 */
import { withQuery } from '../api';
import { currency, t } from '../locale';
import { formatMoney } from '../money';
import { DataTable, Page, Show, useGet } from '../ui';
import { YourPrices } from './prices';

interface Model {
  slug: string;
  name: string;
  family: string;
  sdk: string;
  quants: string[];
  size_bytes: number;
  description: string;
}

const size = (bytes: number) =>
  bytes >= 1e9 ? `${(bytes / 1e9).toFixed(1)} GB` : bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${Math.ceil(bytes / 1e3)} KB`;

export function Models() {
  const models = useGet<Model[]>('/api/models');
  const pricing = useGet<{ models: Array<{ slug: string; unit: 'per_million_tokens' | 'per_request'; price: number }> }>('/api/pricing');
  const priceOf = (slug: string) => {
    const prices = pricing.data?.models.filter((p) => p.slug === slug) ?? [];
    if (prices.length === 0) return '—';
    return prices.map((p) => `${formatMoney(p.price, currency)} ${t(`design.unit.${p.unit}`)}`).join(' · ');
  };
  return (
    <Page title={t('nav.models')}>
      <Show loaded={models}>
        {(list) => (
          <DataTable
            rows={list}
            empty={t('none')}
            head={
              <>
                <th>{t('model')}</th>
                <th>{t('models.family')}</th>
                <th>SDK</th>
                <th class="num">{t('models.size')}</th>
                <th class="num">{t('design.price')}</th>
                <th>{t('models.download')}</th>
              </>
            }
            row={(m) => (
              <tr key={m.slug}>
                <td>
                  <strong>{m.name}</strong> <code>{m.slug}</code>
                  <br />
                  <small>{m.description}</small>
                </td>
                <td>{m.family}</td>
                <td>{m.sdk}</td>
                <td class="num">{size(m.size_bytes)}</td>
                <td class="num nowrap">{priceOf(m.slug)}</td>
                <td class="actions">
                  {m.quants.map((quant) => (
                    <a
                      class="button"
                      href={withQuery(`/api/models/${encodeURIComponent(m.slug)}/download`, { quant, sdk: m.sdk })}
                      download
                      aria-label={`${t('models.download')} ${m.slug} ${quant}`}
                    >
                      {quant}
                    </a>
                  ))}
                </td>
              </tr>
            )}
          />
        )}
      </Show>
      <YourPrices />
    </Page>
  );
}

/** The caller's own model prices (GET /api/billing/prices): their price group, and input, output and cached input per model. */
import { t } from '../locale';
import { formatMoney } from '../money';
import { DataTable, Show, useGet } from '../ui';

interface PriceRow {
  id: string;
  slug: string;
  unit: 'per_million_tokens' | 'per_request';
  price: number;
  input_price?: number;
  output_price?: number;
  cached_input_price?: number;
  currency: string;
}

export function YourPrices() {
  const prices = useGet<{ group: string; multiplier: number; models: PriceRow[] }>('/api/billing/prices');
  const money = (v: number | undefined, currency: string) => (v === undefined ? '—' : formatMoney(v, currency));
  return (
    <section aria-labelledby="your-prices">
      <h2 id="your-prices">{t('pricing.yourPrices')}</h2>
      <Show loaded={prices}>
        {(p) => (
          <>
            <p>{t('pricing.yourGroup', { group: p.group, multiplier: p.multiplier })}</p>
            <DataTable
              data-testid="prices"
              rows={p.models}
              empty={t('pricing.noPrices')}
              head={
                <>
                  <th>{t('model')}</th>
                  <th class="num">{t('pricing.inputShort')}</th>
                  <th class="num">{t('pricing.outputShort')}</th>
                  <th class="num">{t('pricing.cachedShort')}</th>
                  <th />
                </>
              }
              row={(m) => (
                <tr key={m.id}>
                  <td>
                    <code>{m.slug}</code>
                  </td>
                  {m.unit === 'per_request' ? (
                    <td class="num" colSpan={3}>
                      {formatMoney(m.price, m.currency)}
                    </td>
                  ) : (
                    <>
                      <td class="num">{money(m.input_price, m.currency)}</td>
                      <td class="num">{money(m.output_price, m.currency)}</td>
                      <td class="num">{money(m.cached_input_price, m.currency)}</td>
                    </>
                  )}
                  <td>{m.unit === 'per_request' ? t('pricing.perRequest') : t('pricing.perMillion')}</td>
                </tr>
              )}
            />
          </>
        )}
      </Show>
    </section>
  );
}

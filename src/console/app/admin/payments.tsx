/** Admin: every top-up, filtered by status, provider or user, with reconcile (asks the provider, settles once). */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api';
import { formatTime, t } from '../locale';
import { formatMoney } from '../money';
import { Alert, Field, Page, Select, Show, errorText, useCursor, useGet } from '../ui';

interface AdminPayment {
  id: string;
  user_id: string;
  email: string;
  provider: string;
  amount: number;
  currency: string;
  status: string;
  created_at: string;
  paid_at: string | null;
  provider_ref: string | null;
  failure: string | null;
}

export function AdminPayments() {
  const [filters, setFilters] = useState({ status: '', provider: '', user_id: '' });
  const { cursor, reset, Pager } = useCursor();
  const page = useGet<{ payments: AdminPayment[]; next_cursor: string | null }>(
    withQuery('/api/admin/payments', { ...filters, limit: 50, cursor }),
  );
  const [error, setError] = useState<string | null>(null);

  async function reconcile(p: AdminPayment) {
    try {
      await api('POST', `/api/admin/payments/${encodeURIComponent(p.id)}/reconcile`);
      setError(null);
      page.reload();
    } catch (err) {
      setError(errorText(err));
    }
  }

  return (
    <Page title={t('nav.admin.payments')}>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          reset();
          setFilters({
            status: String(f.get('status') ?? ''),
            provider: String(f.get('provider') ?? '').trim(),
            user_id: String(f.get('user_id') ?? '').trim(),
          });
        }}
      >
        <Select
          label={t('status')}
          name="status"
          value={filters.status}
          options={[
            ['', t('admin.any')],
            ...(['pending', 'paid', 'failed', 'expired'] as const).map((s): [string, string] => [s, t(`payment.${s}`)]),
          ]}
        />
        <Field label={t('wallet.provider')} name="provider" value={filters.provider} />
        <Field label={t('admin.userId')} name="user_id" value={filters.user_id} />
        <button type="submit">{t('apply')}</button>
      </form>
      <Alert>{error}</Alert>
      <Show loaded={page}>
        {({ payments, next_cursor }) => (
          <>
            <table>
              <thead>
                <tr>
                  <th>{t('created')}</th>
                  <th>{t('email')}</th>
                  <th>{t('wallet.provider')}</th>
                  <th class="num">{t('amount')}</th>
                  <th>{t('status')}</th>
                  <th>{t('admin.providerRef')}</th>
                  <th>
                    <span class="visually-hidden">{t('actions')}</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {payments.map((p) => (
                  <tr key={p.id}>
                    <td>{formatTime(p.created_at)}</td>
                    <td>{p.email}</td>
                    <td>{p.provider}</td>
                    <td class="num">{formatMoney(p.amount, p.currency)}</td>
                    <td>
                      {t(`payment.${p.status}` as 'payment.paid')}
                      {p.failure ? ` (${p.failure})` : ''}
                    </td>
                    <td>{p.provider_ref ?? '—'}</td>
                    <td>
                      {p.status !== 'paid' && (
                        <button type="button" onClick={() => reconcile(p)}>
                          {t('admin.reconcile')}
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            <Pager next={next_cursor} />
          </>
        )}
      </Show>
    </Page>
  );
}

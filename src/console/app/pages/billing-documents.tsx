/**
 * Invoices (China site: request one for a paid top-up, then download it) or receipts
 * (international site: one per paid card top-up, with what was refunded of it). Downloads are plain
 * links: the HttpOnly session cookie authenticates them, so no token is put in a URL.
 */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api';
import { formatTime, site, t } from '../locale';
import { formatMoney } from '../money';
import { BillingOnly, orgQuery, useOrg } from '../org';
import { DataTable, errorText, Field, Page, Select, Show, Status, useCursor, useGet } from '../ui';

interface Payment {
  id: string;
  provider: string;
  amount: number;
  currency: string;
  status: string;
  created_at: string;
  paid_at: string | null;
  refunded_amount: number;
}
interface Invoice {
  id: string;
  payment_id: string;
  title: string;
  tax_id: string | null;
  amount: number;
  currency: string;
  status: string;
  created_at: string;
}

export const BillingDocuments = () => (
  <BillingOnly title={t(site === 'cn' ? 'nav.invoices' : 'nav.receipts')}>{site === 'cn' ? <Invoices /> : <Receipts />}</BillingOnly>
);

function Receipts() {
  const { current: org } = useOrg();
  const { cursor, Pager } = useCursor();
  const payments = useGet<{ payments: Payment[]; next_cursor: string | null }>(
    withQuery('/api/billing/payments', { status: 'paid', limit: 50, cursor, ...orgQuery(org) }),
  );
  return (
    <Page title={t('nav.receipts')}>
      <Show loaded={payments}>
        {({ payments: list, next_cursor }) => (
          <>
            <DataTable
              rows={list}
              empty={t('docs.noPaid')}
              head={
                <>
                  <th>{t('docs.paidAt')}</th>
                  <th class="num">{t('amount')}</th>
                  <th class="num">{t('wallet.refunded')}</th>
                  <th>{t('wallet.provider')}</th>
                  <th>
                    <span class="visually-hidden">{t('actions')}</span>
                  </th>
                </>
              }
              row={(p) => (
                <tr key={p.id}>
                  <td>{formatTime(p.paid_at)}</td>
                  <td class="num">{formatMoney(p.amount, p.currency)}</td>
                  <td class="num">{p.refunded_amount > 0 ? formatMoney(p.refunded_amount, p.currency) : '—'}</td>
                  <td>{p.provider}</td>
                  <td>
                    <a href={withQuery(`/api/billing/receipts/${encodeURIComponent(p.id)}/download`, orgQuery(org))}>{t('docs.receipt')}</a>
                  </td>
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

function Invoices() {
  const { current: org } = useOrg();
  const invoices = useGet<{ invoices: Invoice[] }>(withQuery('/api/billing/invoices', orgQuery(org)));
  const payments = useGet<{ payments: Payment[] }>(withQuery('/api/billing/payments', { status: 'paid', limit: 200, ...orgQuery(org) }));
  const [errors, setErrors] = useState<{ title?: string; tax_id?: string }>({});
  const [done, setDone] = useState(false);

  async function request(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const title = String(form.get('title') ?? '').trim();
    const taxId = String(form.get('tax_id') ?? '').trim();
    if (!title) return setErrors({ title: t('required') });
    setErrors({});
    try {
      await api('POST', '/api/billing/invoices', {
        payment_id: String(form.get('payment_id')),
        title,
        ...(taxId ? { tax_id: taxId } : {}),
        ...orgQuery(org),
      });
      setDone(true);
      invoices.reload();
    } catch (err) {
      setErrors({ title: errorText(err) });
    }
  }

  const invoiced = new Set(invoices.data?.invoices.map((i) => i.payment_id));
  const open = (payments.data?.payments ?? []).filter((p) => !invoiced.has(p.id));
  return (
    <Page title={t('nav.invoices')}>
      <p>{t('product.invoice.note')}</p>
      {open.length > 0 && (
        <form onSubmit={request} noValidate>
          <h2>{t('docs.request')}</h2>
          <Select
            label={t('docs.payment')}
            name="payment_id"
            options={open.map((p) => [p.id, `${formatMoney(p.amount, p.currency)} · ${formatTime(p.paid_at)}`])}
          />
          <Field label={t('docs.title')} name="title" maxLength={200} error={errors.title} />
          <Field label={t('docs.taxId')} name="tax_id" maxLength={32} error={errors.tax_id} />
          <button type="submit">{t('docs.requestSubmit')}</button>
          {done && <Status>{t('saved')}</Status>}
        </form>
      )}
      <Show loaded={invoices}>
        {({ invoices: list }) => (
          <DataTable
            rows={list}
            empty={t('none')}
            head={
              <>
                <th>{t('created')}</th>
                <th>{t('docs.title')}</th>
                <th class="num">{t('amount')}</th>
                <th>{t('status')}</th>
                <th>
                  <span class="visually-hidden">{t('actions')}</span>
                </th>
              </>
            }
            row={(inv) => (
              <tr key={inv.id}>
                <td>{formatTime(inv.created_at)}</td>
                <td>{inv.title}</td>
                <td class="num">{formatMoney(inv.amount, inv.currency)}</td>
                <td>{inv.status === 'issued' ? t('product.invoice.issued') : inv.status}</td>
                <td>
                  <a href={withQuery(`/api/billing/invoices/${encodeURIComponent(inv.payment_id)}/download`, orgQuery(org))}>
                    {t('docs.download')}
                  </a>
                </td>
              </tr>
            )}
          />
        )}
      </Show>
    </Page>
  );
}

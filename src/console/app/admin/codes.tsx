/**
 * Admin: redemption codes. A new batch's codes are shown once (only their hashes are stored), with
 * a CSV download made here from what the create answered; the list shows each code's prefix and
 * status, and a batch's unused codes can be disabled.
 */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api';
import { currency, formatTime, t } from '../locale';
import { formatMoney, microsToNumber, parseAmount } from '../money';
import { Alert, ConfirmButton, CopyButton, DataTable, Field, Page, Show, Status, errorText, useGet } from '../ui';

interface Batch {
  batch_id: string;
  amount: number;
  currency: string;
  expires_at: string | null;
  codes: string[];
}
interface CodeRow {
  batch_id: string;
  prefix: string;
  amount: number;
  currency: string;
  status: 'unused' | 'redeemed' | 'disabled' | 'expired';
  redeemed_by: string | null;
  redeemed_at: string | null;
  expires_at: string | null;
  note: string | null;
}

/** The batch as the CSV the API answers to `Accept: text/csv` (RFC 4180; no field here needs quoting). */
const csvOf = (b: Batch) => `code,amount,currency,expires_at,batch_id\r\n${b.codes.map((c) => `${c},${b.amount},${b.currency},${b.expires_at ?? ''},${b.batch_id}\r\n`).join('')}`;

export function AdminCodes() {
  const [batchFilter, setBatchFilter] = useState('');
  const list = useGet<{ codes: CodeRow[] }>(withQuery('/api/admin/billing/codes', { batch_id: batchFilter || undefined, limit: 500 }));
  const [created, setCreated] = useState<Batch | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  async function disable(batch: string) {
    try {
      const r = await api<{ disabled: number }>('DELETE', `/api/admin/billing/codes/${encodeURIComponent(batch)}`);
      setError(null);
      setNote(t('codes.disabled', { count: r.disabled }));
      list.reload();
    } catch (err) {
      setError(errorText(err));
    }
  }

  const batches = [...new Set((list.data?.codes ?? []).map((c) => c.batch_id))];
  return (
    <Page title={t('nav.admin.codes')}>
      <CreateBatch
        onCreated={(b) => {
          setCreated(b);
          list.reload();
        }}
      />
      {created && (
        <section aria-labelledby="new-codes" data-testid="new-codes">
          <h2 id="new-codes">{t('codes.onceTitle', { batch: created.batch_id })}</h2>
          <p>
            <strong>{t('codes.onceWarning')}</strong>
          </p>
          <pre>{created.codes.join('\n')}</pre>
          <p class="actions">
            <CopyButton text={created.codes.join('\n')} label={t('codes.list')} />
            <a class="button" download={`codes-${created.batch_id}.csv`} href={`data:text/csv;charset=utf-8,${encodeURIComponent(csvOf(created))}`}>
              {t('codes.downloadCsv')}
            </a>
          </p>
        </section>
      )}
      <section aria-labelledby="codes-list">
        <h2 id="codes-list">{t('codes.list')}</h2>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setBatchFilter(String(new FormData(e.currentTarget).get('batch_id') ?? '').trim());
          }}
        >
          <Field label={t('codes.filter')} name="batch_id" defaultValue={batchFilter} />
          <button type="submit">{t('apply')}</button>
        </form>
        {batches.length > 0 && (
          <p class="actions">
            {batches.map((b) => (
              <ConfirmButton
                key={b}
                label={
                  <>
                    {t('codes.disable')} <code>{b}</code>
                  </>
                }
                aria-label={`${t('codes.disable')} ${b}`}
                question={t('codes.confirmDisable', { batch: b })}
                confirmLabel={t('codes.disable')}
                onConfirm={() => disable(b)}
              />
            ))}
          </p>
        )}
        {note && <Status>{note}</Status>}
        <Alert>{error}</Alert>
        <Show loaded={list}>
          {({ codes }) => (
            <DataTable
              data-testid="codes"
              rows={codes}
              empty={t('none')}
              head={
                <>
                  <th>{t('codes.batch')}</th>
                  <th>{t('codes.prefix')}</th>
                  <th class="num">{t('amount')}</th>
                  <th>{t('status')}</th>
                  <th>{t('codes.redeemedBy')}</th>
                  <th>{t('codes.redeemedAt')}</th>
                  <th>{t('codes.expiresAt')}</th>
                </>
              }
              row={(c) => (
                <tr>
                  <td>
                    <code>{c.batch_id}</code>
                    {c.note && <small> {c.note}</small>}
                  </td>
                  <td>
                    <code>{c.prefix}…</code>
                  </td>
                  <td class="num">{formatMoney(c.amount, c.currency)}</td>
                  <td>{t(`codes.status.${c.status}`)}</td>
                  <td>{c.redeemed_by ? <a href={`/console/admin/users/${encodeURIComponent(c.redeemed_by)}`}>{c.redeemed_by}</a> : '—'}</td>
                  <td>{formatTime(c.redeemed_at)}</td>
                  <td>{formatTime(c.expires_at)}</td>
                </tr>
              )}
            />
          )}
        </Show>
      </section>
    </Page>
  );
}

function CreateBatch({ onCreated }: { onCreated: (b: Batch) => void }) {
  const [errors, setErrors] = useState<{ count?: string; amount?: string; form?: string }>({});
  async function submit(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const count = Number(data.get('count'));
    const micros = parseAmount(String(data.get('amount') ?? ''), 6);
    const found = {
      count: Number.isInteger(count) && count >= 1 && count <= 1000 ? undefined : t('codes.badCount'),
      amount: micros !== null && micros > 0n ? undefined : t('codes.badAmount'),
    };
    setErrors(found);
    if (found.count || found.amount || micros === null) return;
    const expires = String(data.get('expires_at') ?? '');
    const note = String(data.get('note') ?? '').trim();
    try {
      const batch = await api<Batch>('POST', '/api/admin/billing/codes', {
        count,
        amount: microsToNumber(micros),
        ...(expires ? { expires_at: new Date(expires).toISOString() } : {}),
        ...(note ? { note } : {}),
      });
      form.reset();
      onCreated(batch);
    } catch (err) {
      setErrors({ form: errorText(err) });
    }
  }
  return (
    <form onSubmit={submit} noValidate aria-labelledby="create-codes">
      <h2 id="create-codes">{t('codes.create')}</h2>
      <Field label={t('codes.count')} name="count" inputMode="numeric" error={errors.count} />
      <Field label={t('codes.amount', { currency })} name="amount" inputMode="decimal" error={errors.amount} />
      <Field label={t('codes.expiresAt')} name="expires_at" type="datetime-local" />
      <Field label={t('codes.note')} name="note" maxLength={500} />
      <button type="submit">{t('codes.submit')}</button>
      <Alert>{errors.form ?? null}</Alert>
    </form>
  );
}

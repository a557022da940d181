/**
 * Admin: every top-up, filtered by status, provider or user, with reconcile (asks the provider,
 * settles once) and refund (an amount up to what remains, a reason, a confirmation; one
 * Idempotency-Key per opened form, so a second click cannot refund twice).
 */
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, api, newIdempotencyKey, withQuery } from '../api';
import { currency, formatTime, t } from '../locale';
import { formatMicros, formatMoney, microsToNumber, parseAmount, toMicros } from '../money';
import { providerName } from '../product-text';
import { Alert, Dialog, Field, Page, Select, Show, Status, errorText, useCursor, useGet } from '../ui';

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
  refunded_amount: number;
  refunds: Array<{ id: string; amount: number; status: string }>;
}

/** What can still be refunded of a paid payment, in micro-units. */
const remainingOf = (p: AdminPayment) => (p.status === 'paid' ? toMicros(p.amount) - toMicros(p.refunded_amount) : 0n);

export function AdminPayments() {
  const [filters, setFilters] = useState({ status: '', provider: '', user_id: '' });
  const { cursor, reset, Pager } = useCursor();
  const page = useGet<{ payments: AdminPayment[]; next_cursor: string | null }>(
    withQuery('/api/admin/payments', { ...filters, limit: 50, cursor }),
  );
  const [error, setError] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const [refunding, setRefunding] = useState<string | null>(null);

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
      {note && <Status>{note}</Status>}
      <Show loaded={page}>
        {({ payments, next_cursor }) => (
          <>
            {payments.length === 0 ? (
              <p class="empty">{t('none')}</p>
            ) : (
              <table>
                <thead>
                  <tr>
                    <th>{t('created')}</th>
                    <th>{t('email')}</th>
                    <th>{t('wallet.provider')}</th>
                    <th class="num">{t('amount')}</th>
                    <th>{t('status')}</th>
                    <th class="num">{t('admin.refunded')}</th>
                    <th>{t('admin.providerRef')}</th>
                    <th>
                      <span class="visually-hidden">{t('actions')}</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {payments.map((p) => (
                    <Fragment key={p.id}>
                      <tr>
                        <td>{formatTime(p.created_at)}</td>
                        <td>{p.email}</td>
                        <td>{providerName(p.provider, t)}</td>
                        <td class="num">{formatMoney(p.amount, p.currency)}</td>
                        <td>
                          {t(`payment.${p.status}` as 'payment.paid')}
                          {p.failure ? ` (${p.failure})` : ''}
                        </td>
                        <td class="num">{p.refunded_amount > 0 ? formatMoney(p.refunded_amount, p.currency) : '—'}</td>
                        <td>{p.provider_ref ?? '—'}</td>
                        <td>
                          {p.status !== 'paid' && (
                            <button type="button" onClick={() => reconcile(p)}>
                              {t('admin.reconcile')}
                            </button>
                          )}
                          {remainingOf(p) > 0n && refunding !== p.id && (
                            <button
                              type="button"
                              onClick={() => {
                                setNote(null);
                                setRefunding(p.id);
                              }}
                            >
                              {t('admin.refund')}
                            </button>
                          )}
                        </td>
                      </tr>
                      {refunding === p.id && (
                        <tr>
                          <td colSpan={8}>
                            <RefundForm
                              payment={p}
                              onCancel={() => setRefunding(null)}
                              onDone={(done) => {
                                setRefunding(null);
                                setNote(done);
                                page.reload();
                              }}
                            />
                          </td>
                        </tr>
                      )}
                    </Fragment>
                  ))}
                </tbody>
              </table>
            )}
            <Pager next={next_cursor} />
          </>
        )}
      </Show>
    </Page>
  );
}

/** The refund of one payment: amount (what remains, by default), reason, below zero or not, then a confirmation. */
function RefundForm({ payment: p, onDone, onCancel }: { payment: AdminPayment; onDone: (note: string) => void; onCancel: () => void }) {
  const remaining = remainingOf(p);
  const most = formatMicros(remaining, p.currency);
  const [key, setKey] = useState(newIdempotencyKey);
  const [errors, setErrors] = useState<{ amount?: string; reason?: string }>({});
  const [busy, setBusy] = useState(false);
  const [asking, setAsking] = useState<{ micros: bigint; reason: string; allowNegative: boolean } | null>(null);

  function submit(e: Event) {
    e.preventDefault();
    const data = new FormData(e.currentTarget as HTMLFormElement);
    const micros = parseAmount(String(data.get('amount') ?? ''), 6);
    const reason = String(data.get('reason') ?? '').trim();
    const found = {
      amount: micros === null || micros <= 0n || micros > remaining ? t('admin.badRefund', { amount: most }) : undefined,
      reason: reason && reason.length <= 500 ? undefined : t('required'),
    };
    setErrors(found);
    if (found.amount || found.reason || micros === null) return;
    setAsking({ micros, reason, allowNegative: Boolean(data.get('allow_negative')) });
  }

  async function refund({ micros, reason, allowNegative }: { micros: bigint; reason: string; allowNegative: boolean }) {
    setAsking(null);
    const amount = formatMicros(micros, p.currency);
    setBusy(true);
    try {
      const body = { amount: microsToNumber(micros), reason, ...(allowNegative ? { allow_negative: true } : {}) };
      const { payment } = await api<{ payment: AdminPayment }>('POST', `/api/admin/payments/${encodeURIComponent(p.id)}/refund`, body, { 'idempotency-key': key });
      onDone(t(payment.refunds.at(-1)?.status === 'pending' ? 'admin.refundPending' : 'admin.refundDone', { amount }));
    } catch (err) {
      // The server answered: that key is spent. No answer: the same key again cannot refund twice.
      if (err instanceof ApiError) setKey(newIdempotencyKey());
      setErrors({ amount: errorText(err) });
    } finally {
      setBusy(false);
    }
  }

  return (
    <form onSubmit={submit} noValidate aria-label={t('admin.refundOf', { amount: formatMoney(p.amount, p.currency), email: p.email })}>
      <Field
        label={t('admin.refundAmount', { currency })}
        name="amount"
        inputMode="decimal"
        defaultValue={String(microsToNumber(remaining))}
        hint={t('admin.refundHint', { amount: most })}
        error={errors.amount}
      />
      <Field label={t('admin.refundReason')} name="reason" maxLength={500} error={errors.reason} />
      <label class="check">
        <input type="checkbox" name="allow_negative" /> {t('admin.allowNegative')}
      </label>
      <p class="actions">
        <button type="submit" disabled={busy}>
          {t('admin.refundSubmit')}
        </button>
        <button type="button" onClick={onCancel}>
          {t('admin.cancel')}
        </button>
      </p>
      <Dialog
        open={asking !== null}
        title={asking ? t('admin.confirmRefund', { amount: formatMicros(asking.micros, p.currency), email: p.email, provider: p.provider }) : ''}
        onClose={() => setAsking(null)}
      >
        <button type="button" class="danger" onClick={() => asking && refund(asking)}>
          {t('admin.refundSubmit')}
        </button>
      </Dialog>
    </form>
  );
}

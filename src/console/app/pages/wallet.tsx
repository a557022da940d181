/**
 * Balance, top-up and the recent top-ups with what was refunded of them. Card payments open the
 * provider's checkout in a new tab; wallet providers show their QR code. The page polls the
 * payment until it settles and shows progress meanwhile.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, newIdempotencyKey } from '../api';
import { currency, formatTime, t } from '../locale';
import { formatMoney, microsToNumber, parseAmount } from '../money';
import { Alert, DataTable, Field, Page, Select, Show, Status, errorText, useGet } from '../ui';

interface Summary {
  balance: number;
  currency: string;
  total_topups: number;
  total_usage: number;
  month_usage: number;
}
interface Provider {
  id: string;
  name: string;
  currency: string;
  mode: string;
}
interface ListedPayment {
  id: string;
  provider: string;
  amount: number;
  currency: string;
  status: 'pending' | 'paid' | 'failed' | 'expired';
  created_at: string;
  refunded_amount: number;
}
interface Payment {
  id: string;
  status: 'pending' | 'paid' | 'failed' | 'expired';
  amount?: number;
  redirect_url?: string;
  qr_code_url?: string;
  expires_at?: string;
}

export function Wallet() {
  const summary = useGet<Summary>('/api/billing/summary');
  const history = useGet<{ payments: ListedPayment[] }>('/api/billing/payments?limit=10');
  return (
    <Page title={t('wallet.title')}>
      <Show loaded={summary}>
        {(s) => (
          <dl class="stats">
            <div>
              <dt>{t('wallet.balance')}</dt>
              <dd data-testid="balance">{formatMoney(s.balance, s.currency)}</dd>
            </div>
            <div>
              <dt>{t('wallet.monthUsage')}</dt>
              <dd>{formatMoney(s.month_usage, s.currency)}</dd>
            </div>
            <div>
              <dt>{t('wallet.totalTopups')}</dt>
              <dd>{formatMoney(s.total_topups, s.currency)}</dd>
            </div>
          </dl>
        )}
      </Show>
      <TopUp
        onCredited={() => {
          summary.reload();
          history.reload();
        }}
      />
      <section aria-labelledby="topups">
        <h2 id="topups">{t('wallet.history')}</h2>
        <Show loaded={history}>
          {({ payments }) => (
            <DataTable
              data-testid="topups"
              rows={payments}
              empty={t('wallet.noTopups')}
              head={
                <>
                  <th>{t('created')}</th>
                  <th class="num">{t('amount')}</th>
                  <th>{t('wallet.provider')}</th>
                  <th>{t('status')}</th>
                  <th class="num">{t('wallet.refunded')}</th>
                </>
              }
              row={(p) => (
                <tr key={p.id}>
                  <td>{formatTime(p.created_at)}</td>
                  <td class="num">{formatMoney(p.amount, p.currency)}</td>
                  <td>{p.provider}</td>
                  <td>{t(`payment.${p.status}`)}</td>
                  <td class="num">{p.refunded_amount > 0 ? formatMoney(p.refunded_amount, p.currency) : '—'}</td>
                </tr>
              )}
            />
          )}
        </Show>
      </section>
    </Page>
  );
}

function TopUp({ onCredited }: { onCredited: () => void }) {
  const providers = useGet<{ providers: Provider[] }>('/api/payments/providers');
  const [error, setError] = useState<string | null>(null);
  const [payment, setPayment] = useState<Payment | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const micros = parseAmount(String(form.get('amount') ?? ''), 2);
    if (micros === null || micros <= 0n) return setError(t('wallet.badAmount'));
    setError(null);
    setBusy(true);
    try {
      const body = { provider: String(form.get('provider')), amount: microsToNumber(micros), currency };
      setPayment(await api<Payment>('POST', '/api/billing/payments', body, { 'idempotency-key': newIdempotencyKey() }));
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <section aria-labelledby="topup">
      <h2 id="topup">{t('wallet.topUp')}</h2>
      <Show loaded={providers}>
        {({ providers: list }) => (
          <form onSubmit={submit} noValidate>
            <Field label={t('wallet.amount', { currency })} name="amount" inputMode="decimal" autocomplete="off" error={error} />
            <Select label={t('wallet.provider')} name="provider" options={list.map((p) => [p.id, p.name])} />
            <button type="submit" disabled={busy || payment?.status === 'pending'}>
              {t('wallet.pay')}
            </button>
          </form>
        )}
      </Show>
      {payment && <PendingPayment key={payment.id} payment={payment} onCredited={onCredited} />}
    </section>
  );
}

/** Polls GET /api/billing/payments/{id} (which also asks the provider) until the payment leaves pending. */
function PendingPayment({ payment, onCredited }: { payment: Payment; onCredited: () => void }) {
  const [current, setCurrent] = useState<Payment>(payment);
  const [pollError, setPollError] = useState<string | null>(null);
  useEffect(() => {
    if (current.status !== 'pending') {
      if (current.status === 'paid') onCredited();
      return;
    }
    const timer = setTimeout(async () => {
      try {
        const next = await api<Payment>('GET', `/api/billing/payments/${encodeURIComponent(payment.id)}`);
        setPollError(null);
        setCurrent({ ...current, ...next });
      } catch (err) {
        setPollError(errorText(err));
        setCurrent({ ...current });
      }
    }, 1000);
    return () => clearTimeout(timer);
  }, [current]);

  if (current.status === 'paid')
    return <Status>{t('wallet.credited', { amount: current.amount === undefined ? '' : formatMoney(current.amount, currency) })}</Status>;
  if (current.status !== 'pending') return <Alert>{t(current.status === 'failed' ? 'wallet.failed' : 'wallet.expired')}</Alert>;
  return (
    <div class="pending">
      {payment.redirect_url && (
        <p>
          <a class="button" href={payment.redirect_url} target="_blank" rel="noopener">
            {t('wallet.openCheckout')}
          </a>
        </p>
      )}
      {payment.qr_code_url && <img class="qr" src={payment.qr_code_url} alt={t('wallet.qrAlt')} width={200} height={200} />}
      <p role="status">
        <progress aria-label={t('wallet.waiting')} /> {t('wallet.waiting')}
        {payment.expires_at && ` ${t('wallet.expiresAt', { time: formatTime(payment.expires_at) })}`}
      </p>
      {pollError && <p class="error">{pollError}</p>}
    </div>
  );
}

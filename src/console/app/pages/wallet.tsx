/**
 * Balance, top-up and the recent top-ups with what was refunded of them. Card payments open the
 * provider's checkout in a new tab; wallet providers show their QR code. The page polls the
 * payment until it settles and shows progress meanwhile.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, newIdempotencyKey, withQuery } from '../api';
import { currency, formatTime, t } from '../locale';
import { formatMoney, microsToNumber, parseAmount } from '../money';
import { type Org, BillingOnly, orgQuery, useOrg } from '../org';
import { providerName } from '../product-text';
import { Alert, DataTable, Field, Page, Select, Show, Status, errorText, useGet } from '../ui';
import { Redeem } from './redeem';

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

export const Wallet = () => (
  <BillingOnly title={t('wallet.title')}>
    <OwnWallet />
  </BillingOnly>
);

function OwnWallet() {
  const { current: org } = useOrg();
  const summary = useGet<Summary>(withQuery('/api/billing/summary', orgQuery(org)));
  const history = useGet<{ payments: ListedPayment[] }>(withQuery('/api/billing/payments', { limit: 10, ...orgQuery(org) }));
  return (
    <Page title={org ? t('orgs.walletOf', { org: org.name }) : t('wallet.title')}>
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
        org={org}
        onCredited={() => {
          summary.reload();
          history.reload();
        }}
      />
      {/* Codes credit the redeemer's own wallet. */}
      {!org && <Redeem onCredited={summary.reload} />}
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
                  <td>{providerName(p.provider, t)}</td>
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

function TopUp({ org, onCredited }: { org: Org | null; onCredited: () => void }) {
  const providers = useGet<{ providers: Provider[] }>('/api/payments/providers');
  const [error, setError] = useState<string | null>(null);
  const [payment, setPayment] = useState<Payment | null>(null);
  // Whether the shown payment still waits; PendingPayment polls it and says when it settled, so a
  // paid or failed top-up frees the button for the next one without a reload.
  const [waiting, setWaiting] = useState(false);
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const micros = parseAmount(String(form.get('amount') ?? ''), 2);
    if (micros === null || micros <= 0n) return setError(t('wallet.badAmount'));
    setError(null);
    setBusy(true);
    try {
      const body = { provider: String(form.get('provider')), amount: microsToNumber(micros), currency, ...orgQuery(org) };
      const created = await api<Payment>('POST', '/api/billing/payments', body, { 'idempotency-key': newIdempotencyKey() });
      setWaiting(created.status === 'pending');
      setPayment(created);
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
            <Select label={t('wallet.provider')} name="provider" options={list.map((p) => [p.id, providerName(p.id, t)])} />
            <button type="submit" disabled={busy || waiting}>
              {t('wallet.pay')}
            </button>
          </form>
        )}
      </Show>
      {payment && (
        <PendingPayment
          key={payment.id}
          org={org}
          payment={payment}
          onSettled={(status) => {
            setWaiting(false);
            if (status === 'paid') onCredited();
          }}
        />
      )}
    </section>
  );
}

/** Polls GET /api/billing/payments/{id} (which also asks the provider) until the payment leaves pending. */
function PendingPayment({
  org,
  payment,
  onSettled,
}: {
  org: Org | null;
  payment: Payment;
  onSettled: (status: Payment['status']) => void;
}) {
  const [current, setCurrent] = useState<Payment>(payment);
  const [pollError, setPollError] = useState<string | null>(null);
  useEffect(() => {
    if (current.status !== 'pending') {
      onSettled(current.status);
      return;
    }
    const timer = setTimeout(async () => {
      try {
        const next = await api<Payment>('GET', withQuery(`/api/billing/payments/${encodeURIComponent(payment.id)}`, orgQuery(org)));
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
    return (
      <Status>
        {org
          ? t('orgs.credited', { amount: current.amount === undefined ? '' : formatMoney(current.amount, currency), org: org.name })
          : t('wallet.credited', { amount: current.amount === undefined ? '' : formatMoney(current.amount, currency) })}
      </Status>
    );
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

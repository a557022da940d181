/** The wallet's redeem form: POST /api/billing/redeem; every refusal reads "invalid code", and too many failures are 429. */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { t } from '../locale';
import { formatMoney } from '../money';
import { Field, Status, errorText } from '../ui';

interface Redeemed {
  transaction: { amount: number; currency: string };
}

export function Redeem({ onCredited }: { onCredited: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const code = String(new FormData(form).get('code') ?? '').trim();
    setDone(null);
    if (!code) return setError(t('required'));
    setBusy(true);
    try {
      const { transaction } = await api<Redeemed>('POST', '/api/billing/redeem', { code });
      setError(null);
      setDone(t('redeem.done', { amount: formatMoney(transaction.amount, transaction.currency) }));
      form.reset();
      onCredited();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }
  return (
    <section aria-labelledby="redeem">
      <h2 id="redeem">{t('redeem.title')}</h2>
      <form onSubmit={submit} noValidate>
        <Field label={t('redeem.code')} name="code" autocomplete="off" error={error} />
        <button type="submit" disabled={busy}>
          {t('redeem.submit')}
        </button>
      </form>
      {done && <Status>{done}</Status>}
    </section>
  );
}

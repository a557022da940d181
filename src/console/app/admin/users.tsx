/** Admin: find users; one user's page to disable, promote, set a password or adjust the balance (with a reason). */
import { useState } from 'preact/hooks';
import { api, newIdempotencyKey, withQuery } from '../api';
import { currency, formatTime, t, tn } from '../locale';
import { formatMoney, microsToNumber, parseAmount } from '../money';
import { Alert, ConfirmButton, Field, Page, Show, Status, errorText, useCursor, useGet } from '../ui';
import { UserPriceGroup } from './user-price-group';

interface AdminUserRow {
  id: string;
  email: string;
  phone: string | null;
  is_admin: boolean;
  disabled: boolean;
  created_at: string;
  balance: number;
  currency: string;
  price_group: string;
}
interface AdminUserDetail extends AdminUserRow {
  sessions_count?: number;
  keys_count?: number;
  last_login_at?: string | null;
}

export function AdminUsers() {
  const [q, setQ] = useState('');
  const { cursor, reset, Pager } = useCursor();
  const page = useGet<{ users: AdminUserRow[]; next_cursor: string | null }>(withQuery('/api/admin/users', { q, limit: 50, cursor }));
  return (
    <Page title={t('nav.admin.users')}>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          reset();
          setQ(String(new FormData(e.currentTarget).get('q') ?? '').trim());
        }}
      >
        <Field label={t('admin.search')} name="q" type="search" value={q} />
        <button type="submit">{t('admin.searchSubmit')}</button>
      </form>
      <Show loaded={page}>
        {({ users, next_cursor }) => (
          <>
            {users.length === 0 ? (
              <p class="empty">{t('none')}</p>
            ) : (
              <table>
                <thead>
                  <tr>
                    <th>{t('email')}</th>
                    <th>{t('admin.role')}</th>
                    <th>{t('status')}</th>
                    <th class="num">{t('wallet.balance')}</th>
                    <th>{t('created')}</th>
                  </tr>
                </thead>
                <tbody>
                  {users.map((u) => (
                    <tr key={u.id}>
                      <td>
                        <a href={`/console/admin/users/${encodeURIComponent(u.id)}`}>{u.email ?? u.phone}</a>
                      </td>
                      <td>{u.is_admin ? t('admin.admin') : t('admin.user')}</td>
                      <td>{u.disabled ? t('admin.disabled') : t('admin.active')}</td>
                      <td class="num">{formatMoney(u.balance, u.currency)}</td>
                      <td>{formatTime(u.created_at)}</td>
                    </tr>
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

export function AdminUser({ id }: { id: string }) {
  const user = useGet<AdminUserDetail>(`/api/admin/users/${encodeURIComponent(id)}`);
  const [note, setNote] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  async function patch(change: { disabled?: boolean; is_admin?: boolean }) {
    try {
      await api('PATCH', `/api/admin/users/${encodeURIComponent(id)}`, change);
      setError(null);
      setNote(t('saved'));
      user.reload();
    } catch (err) {
      setError(errorText(err));
    }
  }

  return (
    <Page title={user.data?.email ?? t('nav.admin.users')}>
      <Show loaded={user}>
        {(u) => (
          <>
            <dl class="stats">
              <div>
                <dt>{t('wallet.balance')}</dt>
                <dd data-testid="user-balance">{formatMoney(u.balance, u.currency)}</dd>
              </div>
              <div>
                <dt>{t('status')}</dt>
                <dd>{u.disabled ? t('admin.disabled') : t('admin.active')}</dd>
              </div>
              <div>
                <dt>{t('admin.role')}</dt>
                <dd>{u.is_admin ? t('admin.admin') : t('admin.user')}</dd>
              </div>
              <div>
                <dt>{t('admin.lastLogin')}</dt>
                <dd>{formatTime(u.last_login_at)}</dd>
              </div>
              <div>
                <dt>{t('admin.counts')}</dt>
                <dd>{t('product.countsValue', { sessions: tn('product.sessions', u.sessions_count ?? 0), keys: tn('product.keys', u.keys_count ?? 0) })}</dd>
              </div>
            </dl>
            <p class="actions">
              {u.disabled ? (
                <button type="button" onClick={() => patch({ disabled: false })}>
                  {t('admin.enable')}
                </button>
              ) : (
                <ConfirmButton
                  label={t('admin.disable')}
                  question={t('product.confirmDisable', { email: u.email })}
                  confirmLabel={t('admin.disable')}
                  onConfirm={() => patch({ disabled: true })}
                />
              )}
              {u.is_admin ? (
                <ConfirmButton
                  label={t('admin.demote')}
                  question={t('product.confirmDemote', { email: u.email })}
                  confirmLabel={t('admin.demote')}
                  onConfirm={() => patch({ is_admin: false })}
                />
              ) : (
                <button type="button" onClick={() => patch({ is_admin: true })}>
                  {t('admin.promote')}
                </button>
              )}
            </p>
            {note && <Status>{note}</Status>}
            <Alert>{error}</Alert>
            <UserPriceGroup userId={id} current={u.price_group} onDone={user.reload} />
            <Adjustment userId={id} onDone={user.reload} />
            <SetPassword userId={id} />
          </>
        )}
      </Show>
    </Page>
  );
}

function Adjustment({ userId, onDone }: { userId: string; onDone: () => void }) {
  const [errors, setErrors] = useState<{ amount?: string; reason?: string }>({});
  const [done, setDone] = useState<string | null>(null);
  async function submit(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const micros = parseAmount(String(data.get('amount') ?? ''), 6, true);
    const reason = String(data.get('reason') ?? '').trim();
    const found = {
      amount: micros === null || micros === 0n ? t('admin.badAdjustment') : undefined,
      reason: reason && reason.length <= 500 ? undefined : t('required'),
    };
    setErrors(found);
    if (found.amount || found.reason || micros === null) return;
    try {
      const body = { amount: microsToNumber(micros), reason, ...(data.get('allow_negative') ? { allow_negative: true } : {}) };
      await api('POST', `/api/admin/users/${encodeURIComponent(userId)}/adjustments`, body, { 'idempotency-key': newIdempotencyKey() });
      form.reset();
      setDone(t('admin.adjusted'));
      onDone();
    } catch (err) {
      setErrors({ amount: errorText(err) });
    }
  }
  return (
    <form onSubmit={submit} noValidate aria-labelledby="adjust-heading">
      <h2 id="adjust-heading">{t('admin.adjust')}</h2>
      <Field
        label={t('admin.adjustAmount', { currency })}
        name="amount"
        inputMode="decimal"
        hint={t('admin.adjustHint')}
        error={errors.amount}
      />
      <Field label={t('admin.reason')} name="reason" maxLength={500} error={errors.reason} />
      <label class="check">
        <input type="checkbox" name="allow_negative" /> {t('admin.allowNegative')}
      </label>
      <button type="submit">{t('admin.adjustSubmit')}</button>
      {done && <Status>{done}</Status>}
    </form>
  );
}

function SetPassword({ userId }: { userId: string }) {
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const password = String(new FormData(form).get('password') ?? '');
    if (password.length < 8 || password.length > 128) return setError(t('signup.badPassword'));
    try {
      await api('POST', `/api/admin/users/${encodeURIComponent(userId)}/password`, { password });
      form.reset();
      setError(null);
      setDone(true);
    } catch (err) {
      setError(errorText(err));
    }
  }
  return (
    <form onSubmit={submit} noValidate aria-labelledby="setpw-heading">
      <h2 id="setpw-heading">{t('admin.setPassword')}</h2>
      <Field label={t('account.newPassword')} name="password" type="password" autocomplete="new-password" error={error} />
      <button type="submit">{t('admin.setPasswordSubmit')}</button>
      {done && <Status>{t('account.passwordChanged')}</Status>}
    </form>
  );
}

/** Account: password change, linked sign-in providers, two-factor enrolment (QR code, recovery codes shown once), sessions. */
import { useState } from 'preact/hooks';
import { ApiError, api } from '../api';
import { useMe } from '../me';
import { formatTime, t } from '../locale';
import { ConfirmButton, Field, Page, Show, Status, errorText, useGet } from '../ui';
import { EmailStatus, NotificationSettings } from './mail';
import { LinkedIdentities } from './oauth';

export function Account() {
  const me = useMe();
  return (
    <Page title={t('nav.account')}>
      <p>
        {me.email}
        {me.phone ? ` · ${me.phone}` : ''}
      </p>
      <EmailStatus me={me} />
      <PasswordChange hasPassword={me.has_password} />
      <LinkedIdentities />
      <NotificationSettings />
      <TwoFactor enabled={me.two_factor_enabled} />
      <Sessions />
    </Page>
  );
}

/** Without a password yet (a provider-made account) the first one is set without a current one. */
function PasswordChange({ hasPassword: initially }: { hasPassword: boolean }) {
  const [hasPassword, setHasPassword] = useState(initially);
  const [errors, setErrors] = useState<{ current?: string; next?: string }>({});
  const [done, setDone] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const current = String(data.get('current_password') ?? '');
    const next = String(data.get('new_password') ?? '');
    const found = {
      current: current || !hasPassword ? undefined : t('required'),
      next: next.length >= 8 && next.length <= 128 ? undefined : t('signup.badPassword'),
    };
    setErrors(found);
    setDone(false);
    if (found.current || found.next) return;
    try {
      await api('POST', '/api/auth/password', hasPassword ? { current_password: current, new_password: next } : { new_password: next });
      form.reset();
      setHasPassword(true);
      setDone(true);
    } catch (err) {
      setErrors(err instanceof ApiError && err.status === 403 ? { current: t('account.wrongPassword') } : { next: errorText(err) });
    }
  }
  return (
    <form onSubmit={submit} noValidate aria-labelledby="password-heading">
      <h2 id="password-heading">{hasPassword ? t('account.password') : t('oauth.setPassword')}</h2>
      {hasPassword ? (
        <Field label={t('account.currentPassword')} name="current_password" type="password" autocomplete="current-password" error={errors.current} />
      ) : (
        <p>{t('oauth.noPasswordYet')}</p>
      )}
      <Field
        label={t('account.newPassword')}
        name="new_password"
        type="password"
        autocomplete="new-password"
        hint={t('signup.passwordHint')}
        error={errors.next}
      />
      <button type="submit">{hasPassword ? t('account.changePassword') : t('oauth.setPassword')}</button>
      {done && <Status>{t('account.passwordChanged')}</Status>}
    </form>
  );
}

/** The QR code as an image URL; its library is a separate chunk, loaded only when someone enrols. */
async function qrDataUrl(text: string): Promise<string> {
  const { default: qrcode } = await import('qrcode-generator');
  const qr = qrcode(0, 'M');
  qr.addData(text);
  qr.make();
  return qr.createDataURL(4, 8);
}

function TwoFactor({ enabled: initially }: { enabled: boolean }) {
  const [enabled, setEnabled] = useState(initially);
  const [setup, setSetup] = useState<{ secret: string; otpauth_url: string; qr: string } | null>(null);
  const [codes, setCodes] = useState<string[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  async function start() {
    setError(null);
    try {
      const started = await api<{ secret: string; otpauth_url: string }>('POST', '/api/auth/2fa/setup');
      setSetup({ ...started, qr: await qrDataUrl(started.otpauth_url) });
    } catch (err) {
      setError(errorText(err));
    }
  }
  async function confirm(e: Event, path: '/api/auth/2fa/enable' | '/api/auth/2fa/disable') {
    e.preventDefault();
    const code = String(new FormData(e.currentTarget as HTMLFormElement).get('code') ?? '').trim();
    if (!code) return setError(t('required'));
    try {
      const answer = await api<{ recovery_codes?: string[] } | undefined>('POST', path, { code });
      setError(null);
      setSetup(null);
      setEnabled(path.endsWith('enable'));
      setCodes(answer?.recovery_codes ?? null);
    } catch (err) {
      setError(errorText(err));
    }
  }

  return (
    <section aria-labelledby="twofactor-heading">
      <h2 id="twofactor-heading">{t('account.twoFactor')}</h2>
      {codes && (
        <div class="notice" role="status">
          <p>{t('account.recoveryOnce')}</p>
          <ul class="codes" data-testid="recovery-codes">
            {codes.map((c) => (
              <li>
                <code>{c}</code>
              </li>
            ))}
          </ul>
        </div>
      )}
      {enabled ? (
        <form onSubmit={(e) => confirm(e, '/api/auth/2fa/disable')} noValidate>
          <p>{t('account.twoFactorOn')}</p>
          <Field label={t('account.code')} name="code" autocomplete="one-time-code" error={error} />
          <button type="submit">{t('account.disable2fa')}</button>
        </form>
      ) : setup ? (
        <form onSubmit={(e) => confirm(e, '/api/auth/2fa/enable')} noValidate>
          <p>{t('account.scan')}</p>
          <img src={setup.qr} alt={t('account.qrAlt')} width={196} height={196} />
          <p>
            {t('account.secret')} <code data-testid="totp-secret">{setup.secret}</code>
          </p>
          <Field label={t('account.code')} name="code" autocomplete="one-time-code" inputMode="numeric" error={error} />
          <button type="submit">{t('account.enable2fa')}</button>
        </form>
      ) : (
        <>
          <p>{t('account.twoFactorOff')}</p>
          <button type="button" onClick={start}>
            {t('account.setup2fa')}
          </button>
          {error && <p class="error">{error}</p>}
        </>
      )}
    </section>
  );
}

interface Session {
  id: string;
  created_at: string;
  expires_at: string;
  user_agent: string | null;
  ip: string | null;
  current: boolean;
}

function Sessions() {
  const sessions = useGet<Session[]>('/api/auth/sessions');
  async function revoke(s: Session) {
    await api('DELETE', `/api/auth/sessions/${encodeURIComponent(s.id)}`);
    if (s.current) location.assign('/login');
    else sessions.reload();
  }
  return (
    <section aria-labelledby="sessions-heading">
      <h2 id="sessions-heading">{t('account.sessions')}</h2>
      <Show loaded={sessions}>
        {(list) =>
          list.length === 0 ? (
            <p class="empty">{t('none')}</p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th>{t('created')}</th>
                  <th>{t('account.expires')}</th>
                  <th>{t('account.device')}</th>
                  <th>{t('account.address')}</th>
                  <th>
                    <span class="visually-hidden">{t('actions')}</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.map((s) => (
                  <tr key={s.id}>
                    <td>
                      {formatTime(s.created_at)} {s.current && <strong>({t('account.thisSession')})</strong>}
                    </td>
                    <td>{formatTime(s.expires_at)}</td>
                    <td>{s.user_agent ?? '—'}</td>
                    <td>{s.ip ?? '—'}</td>
                    <td>
                      <ConfirmButton
                        label={t('keys.revoke')}
                        question={t('product.confirmEndSession')}
                        confirmLabel={t('keys.revoke')}
                        onConfirm={() => revoke(s)}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Show>
    </section>
  );
}

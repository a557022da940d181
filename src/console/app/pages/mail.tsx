/**
 * The mail side of the console: the pages behind mailed links (/forgot-password,
 * /reset-password, /verify-email; no session needed), the "confirm your email" notice with its
 * resend button, and the account page's email status and notification settings.
 */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { currency, t } from '../locale';
import type { Me } from '../me';
import { Alert, Field, LanguageSwitch, Page, Select, Status, errorText, useGet } from '../ui';

interface SiteFeatures {
  features: { email: boolean; email_verification: 'off' | 'optional' | 'required' };
}

const tokenFromQuery = () => new URLSearchParams(location.search).get('token') ?? '';

/** "Forgot password?" under the login form, when this site sends mail. */
export function ForgotLink() {
  const site = useGet<SiteFeatures>('/api/site');
  if (!site.data?.features.email) return null;
  return (
    <p>
      <a href="/forgot-password">{t('mail.forgotLink')}</a>
    </p>
  );
}

export function ForgotPassword() {
  const [error, setError] = useState<string | null>(null);
  const [sent, setSent] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const email = String(new FormData(e.currentTarget as HTMLFormElement).get('email') ?? '').trim();
    if (!/^[^\s@]+@[^\s@]+$/.test(email)) return setError(t('signup.badEmail'));
    setBusy(true);
    try {
      await api('POST', '/api/auth/password/forgot', { email });
      setError(null);
      setSent(email);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }
  return (
    <main id="main" class="narrow">
      <LanguageSwitch />
      <Page title={t('mail.forgot.title')}>
        {sent ? (
          <Status>{t('mail.forgot.sent', { email: sent })}</Status>
        ) : (
          <form onSubmit={submit} noValidate>
            <p>{t('mail.forgot.intro')}</p>
            <Field label={t('email')} name="email" type="email" autocomplete="email" error={error} />
            <button type="submit" disabled={busy}>
              {t('mail.forgot.submit')}
            </button>
          </form>
        )}
        <p>
          <a href="/login">{t('mail.toLogin')}</a>
        </p>
      </Page>
    </main>
  );
}

export function ResetPassword() {
  const token = tokenFromQuery();
  const [error, setError] = useState<string | null>(null);
  const [broken, setBroken] = useState(!token);
  const [done, setDone] = useState(false);
  const [busy, setBusy] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const password = String(new FormData(e.currentTarget as HTMLFormElement).get('password') ?? '');
    if (password.length < 8 || password.length > 128) return setError(t('signup.badPassword'));
    setBusy(true);
    try {
      await api('POST', '/api/auth/password/reset', { token, password });
      setDone(true);
    } catch (err) {
      // A bad link is the only 400 a well-formed password gets.
      if ((err as { status?: number }).status === 400) setBroken(true);
      else setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }
  return (
    <main id="main" class="narrow">
      <LanguageSwitch />
      <Page title={t('mail.reset.title')}>
        {done ? (
          <>
            <Status>{t('mail.reset.done')}</Status>
            <p>
              <a href="/login">{t('mail.toLogin')}</a>
            </p>
          </>
        ) : broken ? (
          <>
            <Alert>{token ? t('mail.linkBroken') : t('mail.reset.noToken')}</Alert>
            <p>
              <a href="/forgot-password">{t('mail.askAgain')}</a>
            </p>
          </>
        ) : (
          <form onSubmit={submit} noValidate>
            <Field label={t('account.newPassword')} name="password" type="password" autocomplete="new-password" hint={t('signup.passwordHint')} error={error} />
            <button type="submit" disabled={busy}>
              {t('mail.reset.submit')}
            </button>
          </form>
        )}
      </Page>
    </main>
  );
}

/** Submits the link's token as soon as the page opens. */
export function VerifyEmail() {
  const [state, setState] = useState<{ email?: string; error?: string }>({});
  useEffect(() => {
    const token = tokenFromQuery();
    if (!token) return setState({ error: t('mail.linkBroken') });
    api<{ email: string }>('POST', '/api/auth/email/verify', { token }).then(
      (answer) => setState({ email: answer.email }),
      (err) => setState({ error: (err as { status?: number }).status === 400 ? t('mail.linkBroken') : errorText(err) }),
    );
  }, []);
  return (
    <main id="main" class="narrow">
      <LanguageSwitch />
      <Page title={t('mail.verify.title')}>
        {state.email ? (
          <Status>{t('mail.verify.done', { email: state.email })}</Status>
        ) : state.error ? (
          <Alert>{state.error}</Alert>
        ) : (
          <p aria-busy="true">{t('mail.verify.working')}</p>
        )}
        <p>
          <a href="/console">{t('mail.verify.toConsole')}</a>
        </p>
      </Page>
    </main>
  );
}

/** Above every console page while the address is not confirmed (and the site confirms addresses). */
export function VerifyEmailNotice({ me }: { me: Pick<Me, 'email' | 'email_verified'> }) {
  const site = useGet<SiteFeatures>(me.email_verified ? null : '/api/site');
  const [sent, setSent] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const mode = site.data?.features.email ? site.data.features.email_verification : 'off';
  if (me.email_verified || mode === 'off' || !me.email) return null;
  async function resend() {
    try {
      await api('POST', '/api/auth/email/verify/send');
      setError(null);
      setSent(true);
    } catch (err) {
      setError(errorText(err));
    }
  }
  return (
    <section class="notice" aria-label={t('mail.verify.title')}>
      <p>{t(mode === 'required' ? 'mail.notice.required' : 'mail.notice.unverified', { email: me.email })}</p>
      {sent ? (
        <Status>{t('mail.notice.resent')}</Status>
      ) : (
        <button type="button" onClick={resend}>
          {t('mail.notice.resend')}
        </button>
      )}
      {error && <p class="error">{error}</p>}
    </section>
  );
}

/** The account page's email line: confirmed or not. */
export function EmailStatus({ me }: { me: Pick<Me, 'email' | 'email_verified'> }) {
  return (
    <p>
      {t('mail.account.email')}: {me.email} ({me.email_verified ? t('mail.account.verified') : t('mail.account.unverified')})
    </p>
  );
}

/** Low-balance mail threshold (GET/PUT /api/auth/notifications); shown only where the site sends mail. */
export function NotificationSettings() {
  const site = useGet<SiteFeatures>('/api/site');
  const settings = useGet<{ low_balance: number | null; currency: string; language: 'en' | 'zh-CN' }>('/api/auth/notifications');
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  if (!site.data?.features.email || !settings.data) return null;
  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const raw = String(form.get('low_balance') ?? '').trim();
    setSaved(false);
    if (raw !== '' && !/^\d+(\.\d{1,6})?$/.test(raw)) return setError(t('mail.notifications.badAmount'));
    try {
      await api('PUT', '/api/auth/notifications', { low_balance: raw === '' ? null : Number(raw), language: form.get('language') });
      setError(null);
      setSaved(true);
      settings.reload();
    } catch (err) {
      setError(errorText(err));
    }
  }
  return (
    <form onSubmit={submit} noValidate aria-labelledby="notifications-heading">
      <h2 id="notifications-heading">{t('mail.notifications.title')}</h2>
      <p>{t('mail.notifications.intro')}</p>
      <Field
        label={t('mail.notifications.lowBalance', { currency })}
        name="low_balance"
        inputMode="decimal"
        defaultValue={settings.data.low_balance === null ? '' : String(settings.data.low_balance)}
        hint={t('mail.notifications.lowBalanceHint')}
        error={error}
      />
      <Select
        label={t('mail.notifications.language')}
        name="language"
        value={settings.data.language}
        options={[
          ['en', 'English'],
          ['zh-CN', '简体中文'],
        ]}
      />
      <button type="submit">{t('save')}</button>
      {saved && <Status>{t('saved')}</Status>}
    </form>
  );
}

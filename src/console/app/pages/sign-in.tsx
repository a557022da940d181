/** /login (with the 2FA step) and /signup. The server sets the HttpOnly session cookie on success. */
import { useState } from 'preact/hooks';
import { ApiError, api } from '../api';
import { t } from '../locale';
import { Field, LanguageSwitch, Page, errorText } from '../ui';
import { ProviderButtons } from './oauth';

/** Only console paths are followed after sign-in, never another site (no open redirect). */
function afterSignIn() {
  const next = new URLSearchParams(location.search).get('next') ?? '';
  location.assign(/^\/console(\/|$|\?)/.test(next) ? next : '/console');
}

type LoginAnswer = { token: string } | { two_factor_required: true; challenge_token: string };

/** A provider sign-in of a 2FA account lands on /login#two_factor=<challenge>: in the fragment, so no server or Referer sees it. */
function challengeFromProvider(): string | null {
  const challenge = new URLSearchParams(location.hash.slice(1)).get('two_factor');
  if (challenge) history.replaceState(null, '', location.pathname + location.search);
  return challenge;
}

export function Login() {
  const [errors, setErrors] = useState<{ identifier?: string; password?: string; code?: string }>({});
  const [challenge, setChallenge] = useState<string | null>(challengeFromProvider);
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const identifier = String(form.get('identifier') ?? '').trim();
    const password = String(form.get('password') ?? '');
    const missing = { identifier: identifier ? undefined : t('required'), password: password ? undefined : t('required') };
    setErrors(missing);
    if (missing.identifier || missing.password) return;
    setBusy(true);
    try {
      const answer = await api<LoginAnswer>('POST', '/api/auth/login', { identifier, password });
      if ('two_factor_required' in answer) setChallenge(answer.challenge_token);
      else afterSignIn();
    } catch (err) {
      setErrors({ password: err instanceof ApiError && err.status === 401 ? t('login.wrong') : errorText(err) });
    } finally {
      setBusy(false);
    }
  }

  async function verify(e: Event) {
    e.preventDefault();
    const code = String(new FormData(e.currentTarget as HTMLFormElement).get('code') ?? '').trim();
    if (!code) return setErrors({ code: t('required') });
    setBusy(true);
    try {
      await api('POST', '/api/auth/2fa/verify', { challenge_token: challenge, code });
      afterSignIn();
    } catch (err) {
      setErrors({ code: errorText(err) });
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" class="narrow">
      <LanguageSwitch />
      <Page title={t('login.title')}>
        {challenge === null ? (
          <form onSubmit={submit} noValidate>
            <Field label={t('login.identifier')} name="identifier" autocomplete="username" error={errors.identifier} />
            <Field label={t('password')} name="password" type="password" autocomplete="current-password" error={errors.password} />
            <button type="submit" disabled={busy}>
              {t('login.submit')}
            </button>
          </form>
        ) : (
          <form onSubmit={verify} noValidate>
            <p>{t('login.twoFactor')}</p>
            <Field label={t('account.code')} name="code" autocomplete="one-time-code" inputMode="numeric" error={errors.code} />
            <button type="submit" disabled={busy}>
              {t('login.verify')}
            </button>
          </form>
        )}
        {challenge === null && <ProviderButtons />}
        <p>
          <a href="/signup">{t('login.toSignup')}</a>
        </p>
      </Page>
    </main>
  );
}

export function Signup() {
  const [errors, setErrors] = useState<{ email?: string; password?: string }>({});
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const email = String(form.get('email') ?? '').trim();
    const password = String(form.get('password') ?? '');
    const found = {
      email: /^[^\s@]+@[^\s@]+$/.test(email) ? undefined : t('signup.badEmail'),
      password: password.length >= 8 && password.length <= 128 ? undefined : t('signup.badPassword'),
    };
    setErrors(found);
    if (found.email || found.password) return;
    setBusy(true);
    try {
      await api('POST', '/api/auth/register', { email, password });
      afterSignIn();
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) setErrors({ email: t('signup.taken') });
      else setErrors({ password: errorText(err) });
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" class="narrow">
      <LanguageSwitch />
      <Page title={t('signup.title')}>
        <form onSubmit={submit} noValidate>
          <Field label={t('email')} name="email" type="email" autocomplete="email" error={errors.email} />
          <Field
            label={t('password')}
            name="password"
            type="password"
            autocomplete="new-password"
            hint={t('signup.passwordHint')}
            error={errors.password}
          />
          <button type="submit" disabled={busy}>
            {t('signup.submit')}
          </button>
        </form>
        <ProviderButtons signUp />
        <p>
          <a href="/login">{t('signup.toLogin')}</a>
        </p>
      </Page>
    </main>
  );
}

/** /login (with the 2FA step) and /signup. The server sets the HttpOnly session cookie on success. */
import { useState } from 'preact/hooks';
import { ApiError, api } from '../api';
import { t } from '../locale';
import { Field, LanguageSwitch, Page, Status, errorText } from '../ui';
import { ForgotLink } from './mail';
import { PhoneCodeForm, PhoneReset, phoneFirst, usePhoneLogin } from './phone-sign-in';
import { ProviderButtons } from './oauth';

/**
 * A console page named in the fragment (`#/invite?token=…` of an invite link): the browser keeps a
 * fragment through the server's redirect to sign-in, and it is carried on from here to the console.
 */
const consoleFragment = () => (location.hash.startsWith('#/') ? location.hash : '');

/** Only console paths are followed after sign-in, never another site (no open redirect). */
function afterSignIn() {
  const next = new URLSearchParams(location.search).get('next') ?? '';
  location.assign((/^\/console(\/|$|\?)/.test(next) ? next : '/console') + consoleFragment());
}

/** The other sign-in page, keeping where to go afterwards (an invite link followed by someone without an account yet). */
function keepingNext(path: string) {
  const next = new URLSearchParams(location.search).get('next');
  return (next ? `${path}?next=${encodeURIComponent(next)}` : path) + consoleFragment();
}

type LoginAnswer = { token: string } | { two_factor_required: true; challenge_token: string };

/** A provider sign-in of a 2FA account lands on /login#two_factor=<challenge>: in the fragment, so no server or Referer sees it. */
function challengeFromProvider(): string | null {
  const challenge = new URLSearchParams(location.hash.slice(1)).get('two_factor');
  if (challenge) history.replaceState(null, '', location.pathname + location.search);
  return challenge;
}

export function Login() {
  const [errors, setErrors] = useState<{ identifier?: string; password?: string }>({});
  const [challenge, setChallenge] = useState<string | null>(challengeFromProvider);
  const [busy, setBusy] = useState(false);
  // Phone codes, when the site has them: the first choice on the China site.
  const phoneLogin = usePhoneLogin();
  const [mode, setMode] = useState<'password' | 'phone' | 'reset' | null>(null);
  const shown = mode ?? (phoneLogin && phoneFirst ? 'phone' : 'password');

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

  const switchTo = (to: 'password' | 'phone' | 'reset', label: Parameters<typeof t>[0]) => (
    <button type="button" onClick={() => setMode(to)}>
      {t(label)}
    </button>
  );

  return (
    <main id="main" class="narrow">
      <LanguageSwitch />
      <Page title={t(shown === 'reset' ? 'phone.resetTitle' : 'login.title')}>
        {new URLSearchParams(location.search).has('expired') && <Status>{t('product.sessionEnded')}</Status>}
        {challenge !== null ? (
          <TwoFactorStep challenge={challenge} />
        ) : phoneLogin === null && phoneFirst ? (
          <p aria-busy="true">{t('loading')}</p>
        ) : shown === 'reset' ? (
          <PhoneReset onBack={() => setMode('password')} />
        ) : shown === 'phone' ? (
          <PhoneCodeForm purpose="login" onSignedIn={afterSignIn} onChallenge={setChallenge} />
        ) : (
          <form onSubmit={submit} noValidate>
            <Field label={t('login.identifier')} name="identifier" autocomplete="username" error={errors.identifier} />
            <Field label={t('password')} name="password" type="password" autocomplete="current-password" error={errors.password} />
            <button type="submit" disabled={busy}>
              {t('login.submit')}
            </button>
          </form>
        )}
        {phoneLogin && challenge === null && shown !== 'reset' && (
          <p>
            {shown === 'password' ? switchTo('phone', 'phone.useCode') : switchTo('password', 'phone.usePassword')}
            {phoneFirst && shown === 'password' && switchTo('reset', 'phone.forgot')}
          </p>
        )}
        <ForgotLink />
        {challenge === null && <ProviderButtons />}
        <p>
          <a href={keepingNext('/signup')}>{t('login.toSignup')}</a>
        </p>
      </Page>
    </main>
  );
}

/** The second step of a sign-in to an account with 2FA (after a password or a phone code). */
function TwoFactorStep({ challenge }: { challenge: string }) {
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);

  async function verify(e: Event) {
    e.preventDefault();
    const code = String(new FormData(e.currentTarget as HTMLFormElement).get('code') ?? '').trim();
    if (!code) return setError(t('required'));
    setBusy(true);
    try {
      await api('POST', '/api/auth/2fa/verify', { challenge_token: challenge, code });
      afterSignIn();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <form onSubmit={verify} noValidate>
      <p>{t('login.twoFactor')}</p>
      <Field label={t('account.code')} name="code" autocomplete="one-time-code" inputMode="numeric" error={error} />
      <button type="submit" disabled={busy}>
        {t('login.verify')}
      </button>
    </form>
  );
}

export function Signup() {
  const [errors, setErrors] = useState<{ email?: string; password?: string }>({});
  const [busy, setBusy] = useState(false);
  // EMAIL_VERIFICATION=required: 202 and no session; the link comes by mail (pages/mail.tsx).
  const [mailedTo, setMailedTo] = useState<string | null>(null);
  const phoneLogin = usePhoneLogin();
  const [mode, setMode] = useState<'email' | 'phone' | null>(null);
  const shown = mode ?? (phoneLogin && phoneFirst ? 'phone' : 'email');
  // A register code for a number that has an account signs it in, 2FA included.
  const [challenge, setChallenge] = useState<string | null>(null);

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
      const answer = await api<{ token?: string }>('POST', '/api/auth/register', { email, password });
      if (answer.token) afterSignIn();
      else setMailedTo(email);
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
        {mailedTo && <Status>{t('mail.signup.checkMail', { email: mailedTo })}</Status>}
        {challenge !== null ? (
          <TwoFactorStep challenge={challenge} />
        ) : phoneLogin === null && phoneFirst ? (
          <p aria-busy="true">{t('loading')}</p>
        ) : shown === 'phone' ? (
          <PhoneCodeForm purpose="register" onSignedIn={afterSignIn} onChallenge={setChallenge} />
        ) : (
          <form onSubmit={submit} noValidate hidden={mailedTo !== null}>
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
        )}
        {phoneLogin && challenge === null && (
          <p>
            <button type="button" onClick={() => setMode(shown === 'phone' ? 'email' : 'phone')}>
              {t(shown === 'phone' ? 'phone.signupWithEmail' : 'phone.signupWithPhone')}
            </button>
          </p>
        )}
        {challenge === null && <ProviderButtons signUp />}
        <p>
          <a href={keepingNext('/login')}>{t('signup.toLogin')}</a>
        </p>
      </Page>
    </main>
  );
}

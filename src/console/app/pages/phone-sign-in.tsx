/**
 * The phone code forms of /login (sign in, reset a password) and /signup, shown when /api/site
 * says features.phone_login. The code is asked for with POST /api/auth/phone/code (always 202: the
 * page never learns whether the number has an account), then used with /api/auth/phone/login or
 * /api/auth/phone/reset.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api } from '../api';
import { site, t } from '../locale';
import { Field, Status, errorText, useGet } from '../ui';

type Purpose = 'login' | 'register' | 'reset';
type LoginAnswer = { token: string } | { two_factor_required: true; challenge_token: string };

/** The server lets one code a minute go to a number: the button waits as long. */
const RESEND_SECONDS = 60;

/** Whether this site signs in by phone code; null while /api/site loads (an error counts as no). */
export function usePhoneLogin(): boolean | null {
  const loaded = useGet<{ features: { phone_login: boolean } }>('/api/site');
  if (loaded.error) return false;
  return loaded.data ? loaded.data.features.phone_login : null;
}

/** On the China site phone codes are the first way in. */
export const phoneFirst = site === 'cn';

export function PhoneCodeForm({
  purpose,
  onSignedIn,
  onChallenge,
  onReset,
}: {
  purpose: Purpose;
  onSignedIn?: () => void;
  onChallenge?: (challengeToken: string) => void;
  onReset?: () => void;
}) {
  const [errors, setErrors] = useState<{ phone?: string; code?: string; password?: string }>({});
  const [sent, setSent] = useState(false);
  const [wait, setWait] = useState(0);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (wait <= 0) return;
    const tick = setTimeout(() => setWait((w) => w - 1), 1000);
    return () => clearTimeout(tick);
  }, [wait]);

  async function send(e: Event) {
    const phone = String(new FormData((e.currentTarget as HTMLButtonElement).form!).get('phone') ?? '').trim();
    if (!phone) return setErrors({ phone: t('phone.badNumber') });
    setErrors({});
    setBusy(true);
    try {
      await api('POST', '/api/auth/phone/code', { phone, purpose });
      setSent(true);
      setWait(RESEND_SECONDS);
    } catch (err) {
      setErrors({ phone: err instanceof ApiError && err.status === 429 ? t('phone.tooMany') : errorText(err) });
    } finally {
      setBusy(false);
    }
  }

  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const phone = String(form.get('phone') ?? '').trim();
    const code = String(form.get('code') ?? '').trim();
    const password = String(form.get('password') ?? '');
    const found = {
      phone: phone ? undefined : t('phone.badNumber'),
      code: /^\d{6}$/.test(code) ? undefined : t('phone.badCode'),
      password: purpose !== 'reset' || (password.length >= 8 && password.length <= 128) ? undefined : t('signup.badPassword'),
    };
    setErrors(found);
    if (found.phone || found.code || found.password) return;
    setBusy(true);
    try {
      if (purpose === 'reset') {
        await api('POST', '/api/auth/phone/reset', { phone, code, password });
        onReset?.();
      } else {
        const answer = await api<LoginAnswer>('POST', '/api/auth/phone/login', { phone, code });
        if ('two_factor_required' in answer) onChallenge?.(answer.challenge_token);
        else onSignedIn?.();
      }
    } catch (err) {
      setErrors({ code: err instanceof ApiError && err.status === 401 ? t('phone.wrongCode') : errorText(err) });
    } finally {
      setBusy(false);
    }
  }

  return (
    <form onSubmit={submit} noValidate>
      <Field
        label={t('phone.number')}
        name="phone"
        autocomplete="tel"
        hint={site === 'cn' ? t('phone.numberHintCn') : t('phone.numberHint')}
        error={errors.phone}
      />
      <button type="button" onClick={send} disabled={busy || wait > 0}>
        {wait > 0 ? t('phone.resendIn', { seconds: wait }) : t('phone.send')}
      </button>
      {sent && <Status>{t('phone.sent')}</Status>}
      <Field label={t('phone.code')} name="code" autocomplete="one-time-code" inputMode="numeric" maxLength={6} error={errors.code} />
      {purpose === 'reset' && (
        <Field
          label={t('phone.newPassword')}
          name="password"
          type="password"
          autocomplete="new-password"
          hint={t('signup.passwordHint')}
          error={errors.password}
        />
      )}
      <button type="submit" disabled={busy}>
        {t(purpose === 'login' ? 'phone.signIn' : purpose === 'register' ? 'phone.signUp' : 'phone.reset')}
      </button>
    </form>
  );
}

/** Reset by phone code: a new password, every session ended; then back to log in. */
export function PhoneReset({ onBack }: { onBack: () => void }) {
  const [done, setDone] = useState(false);
  return (
    <>
      {done ? <Status>{t('phone.resetDone')}</Status> : <PhoneCodeForm purpose="reset" onReset={() => setDone(true)} />}
      <p>
        <button type="button" onClick={onBack}>
          {t('phone.backToLogin')}
        </button>
      </p>
    </>
  );
}

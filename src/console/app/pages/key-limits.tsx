/**
 * The limit fields of an API key (models, spend limit and period, expiry, requests per minute),
 * shared by the create form and the edit form, and the reading of those fields into the body the
 * API takes. Creating leaves an empty field out; editing sends null for it, which clears the limit.
 */
import { useId } from 'preact/hooks';
import { t } from '../locale';
import { microsToNumber, parseAmount } from '../money';
import { Field } from '../ui';

export interface KeyLimits {
  models?: string[] | null;
  spend_limit?: number | null;
  spend_period?: string | null;
  expires_at?: string | null;
  rpm?: number | null;
}

export type LimitErrors = Partial<Record<'name' | keyof KeyLimits, string>>;

const FIELDS = ['models', 'spend_limit', 'spend_period', 'expires_at', 'rpm'] as const;

/** The API names the field it refuses ("rpm must be …"), so its message goes next to that field. */
export function errorsFromApi(message: string): LimitErrors {
  const field = FIELDS.find((f) => message.includes(f)) ?? 'name';
  return { [field]: message };
}

/** An ISO time as the value of a datetime-local input, in the browser's zone. */
function localInput(iso: string | null | undefined): string {
  if (!iso) return '';
  const at = new Date(iso);
  return new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

export function LimitFields({ current, errors, models }: { current?: KeyLimits; errors: LimitErrors; models: string[] }) {
  const periodId = useId();
  const listId = useId();
  return (
    <>
      <Field
        label={t('keys.models')}
        name="models"
        list={listId}
        hint={t('keys.modelsHint')}
        defaultValue={current?.models?.join(', ') ?? ''}
        error={errors.models}
      />
      <datalist id={listId}>
        {models.map((m) => (
          <option value={m} />
        ))}
      </datalist>
      <Field
        label={t('keys.spendLimit')}
        name="spend_limit"
        inputMode="decimal"
        defaultValue={current?.spend_limit != null ? String(current.spend_limit) : ''}
        error={errors.spend_limit}
      />
      <div class="field">
        <label for={periodId}>{t('keys.spendPeriod')}</label>
        <select id={periodId} name="spend_period" defaultValue={current?.spend_period ?? 'total'}>
          <option value="day">{t('keys.period.day')}</option>
          <option value="month">{t('keys.period.month')}</option>
          <option value="total">{t('keys.period.total')}</option>
        </select>
        {errors.spend_period && (
          <small class="error" role="alert">
            {errors.spend_period}
          </small>
        )}
      </div>
      <Field
        label={t('keys.expiresAt')}
        name="expires_at"
        type="datetime-local"
        defaultValue={localInput(current?.expires_at)}
        error={errors.expires_at}
      />
      <Field label={t('keys.rpmLimit')} name="rpm" inputMode="numeric" defaultValue={current?.rpm != null ? String(current.rpm) : ''} error={errors.rpm} />
    </>
  );
}

/** The limits typed into `form`; on a typing mistake, the errors by field instead. */
export function readLimits(form: FormData, clearEmpty: boolean): { limits: KeyLimits } | { errors: LimitErrors } {
  const text = (name: string) => String(form.get(name) ?? '').trim();
  const empty = clearEmpty ? null : undefined;
  const errors: LimitErrors = {};
  const limits: KeyLimits = {};

  const models = text('models')
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);
  limits.models = models.length ? models : empty;

  if (text('spend_limit')) {
    const micros = parseAmount(text('spend_limit'), 6);
    if (micros === null) errors.spend_limit = t('keys.badAmount');
    else {
      limits.spend_limit = microsToNumber(micros);
      limits.spend_period = text('spend_period');
    }
  } else limits.spend_limit = empty;

  // datetime-local holds a wall-clock time; Date reads it in the browser's zone.
  limits.expires_at = text('expires_at') ? new Date(text('expires_at')).toISOString() : empty;

  if (text('rpm')) {
    if (/^[1-9]\d{0,8}$/.test(text('rpm'))) limits.rpm = Number(text('rpm'));
    else errors.rpm = t('keys.badRpm');
  } else limits.rpm = empty;

  return Object.keys(errors).length ? { errors } : { limits };
}


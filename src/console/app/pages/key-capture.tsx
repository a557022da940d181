/** The API key forms' capture checkbox (docs/captures.md): its requests and answers are kept for the Captures page. */
import { useId } from 'preact/hooks';
import { t } from '../locale';

export function CaptureCheckbox({ checked }: { checked?: boolean }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>
        <input id={id} type="checkbox" name="capture" defaultChecked={checked ?? false} aria-describedby={`${id}-hint`} /> {t('captures.keyCapture')}
      </label>
      <small id={`${id}-hint`} class="hint">
        {t('captures.keyCaptureHint')}
      </small>
    </div>
  );
}

/** The checkbox's value as the API takes it. */
export const captureOf = (form: FormData) => form.get('capture') === 'on';

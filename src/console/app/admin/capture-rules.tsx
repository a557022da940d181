/** Admin: the capture rules and retention (GET/PUT /api/admin/router/capture), edited as a table and saved whole. */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { t } from '../locale';
import { Alert, Field, Page, Show, Status, errorText, useGet } from '../ui';

interface Rule {
  user_id?: string;
  model?: string;
  sample: number;
}
interface Settings {
  rules: Rule[];
  retention_days: number;
}
type Row = { user_id: string; model: string; sample: string };

export function AdminCaptureRules() {
  const settings = useGet<Settings>('/api/admin/router/capture');
  return (
    <Page title={t('nav.admin.captureRules')}>
      <p>{t('captures.rulesIntro')}</p>
      <Show loaded={settings}>{(s) => <RulesForm settings={s} />}</Show>
    </Page>
  );
}

function RulesForm({ settings }: { settings: Settings }) {
  const toRows = (s: Settings) => s.rules.map((r) => ({ user_id: r.user_id ?? '', model: r.model ?? '', sample: String(r.sample) }));
  const [rows, setRows] = useState<Row[]>(toRows(settings));
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => setRows(toRows(settings)), [settings]);
  const edit = (i: number, key: keyof Row, value: string) => setRows(rows.map((r, j) => (j === i ? { ...r, [key]: value } : r)));
  const columns: Array<[keyof Row, string]> = [
    ['user_id', t('captures.userId')],
    ['model', t('model')],
    ['sample', t('captures.sample')],
  ];

  async function save(e: Event) {
    e.preventDefault();
    setSaved(false);
    try {
      const rules = rows.map((r) => ({ ...(r.user_id.trim() ? { user_id: r.user_id.trim() } : {}), ...(r.model.trim() ? { model: r.model.trim() } : {}), sample: Number(r.sample) }));
      const retention = Number(new FormData(e.currentTarget as HTMLFormElement).get('retention_days'));
      await api('PUT', '/api/admin/router/capture', { rules, retention_days: retention });
      setError(null);
      setSaved(true);
    } catch (err) {
      setError(errorText(err));
    }
  }

  return (
    <form aria-label={t('nav.admin.captureRules')} onSubmit={save}>
      <table>
        <thead>
          <tr>
            {columns.map(([, label]) => (
              <th>{label}</th>
            ))}
            <th>
              <span class="visually-hidden">{t('actions')}</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row, i) => (
            <tr>
              {columns.map(([key, label]) => (
                <td>
                  <input aria-label={`${label} ${i + 1}`} value={row[key]} onInput={(e) => edit(i, key, e.currentTarget.value)} />
                </td>
              ))}
              <td>
                <button type="button" onClick={() => setRows(rows.filter((_, j) => j !== i))}>
                  {t('admin.removeRow')}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="actions">
        <button type="button" onClick={() => setRows([...rows, { user_id: '', model: '', sample: '1' }])}>
          {t('admin.addRow')}
        </button>
      </p>
      <Field label={t('captures.retention')} name="retention_days" defaultValue={String(settings.retention_days)} inputMode="numeric" required />
      <p class="actions">
        <button type="submit">{t('save')}</button>
      </p>
      <Alert>{error}</Alert>
      {saved && <Status>{t('saved')}</Status>}
    </form>
  );
}

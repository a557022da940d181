/**
 * Admin: router backends (health, load, last error) with the admin-managed set editable, and
 * supervised runtime processes.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api } from '../api';
import { formatTime, t } from '../locale';
import { Alert, DataTable, errorText, Page, Show, Status, useGet } from '../ui';

interface Backend {
  model: string;
  url: string;
  source: string;
  weight?: number;
  enabled?: boolean;
  has_api_key?: boolean;
  healthy: boolean;
  inflight: number;
  consecutive_failures: number;
  last_error: string | null;
  last_probe_at: string | null;
  breaker?: { state: 'closed' | 'open' | 'half-open'; attempts: number; failures: number; probe_at: string | null } | null;
}
interface Process {
  name: string;
  kind: string;
  model: string;
  state: string;
  pid: number | null;
  port: number | null;
  restarts: number;
  last_error: string | null;
  ready_at: string | null;
}

export function AdminHealth() {
  const backends = useGet<{ backends: Backend[] }>('/api/admin/router/backends');
  const runtimes = useGet<{ processes: Process[] }>('/api/admin/runtimes');
  // The same list until the backends are read again: a new array at every render (the runtimes
  // arriving, say) would reset the form's rows and lose what the operator was typing.
  const managed = useMemo(() => backends.data?.backends.filter((b) => b.source === 'admin'), [backends.data]);
  return (
    <Page title={t('nav.admin.health')}>
      <h2>{t('admin.backends')}</h2>
      <Show loaded={backends}>
        {({ backends: list }) => (
          <DataTable
            rows={list}
            empty={t('none')}
            head={
              <>
                <th>{t('model')}</th>
                <th>URL</th>
                <th>{t('admin.source')}</th>
                <th class="num">{t('admin.weight')}</th>
                <th>{t('status')}</th>
                <th>{t('breaker.column')}</th>
                <th class="num">{t('admin.inflight')}</th>
                <th>{t('admin.lastProbe')}</th>
                <th>{t('admin.lastError')}</th>
              </>
            }
            row={(b) => (
              <tr>
                <td>{b.model}</td>
                <td>
                  <code>{b.url}</code>
                </td>
                <td>{b.source}</td>
                <td class="num">{b.enabled === false ? t('admin.off') : (b.weight ?? 1)}</td>
                <td class={b.healthy ? 'ok' : 'bad'}>
                  {b.healthy ? t('admin.healthy') : t('admin.down', { failures: b.consecutive_failures })}
                </td>
                <BreakerCell breaker={b.breaker} />
                <td class="num">{b.inflight}</td>
                <td>{formatTime(b.last_probe_at)}</td>
                <td>{b.last_error ?? '—'}</td>
              </tr>
            )}
          />
        )}
      </Show>
      <p class="hint">{t('breaker.note')}</p>
      {managed && <ManagedBackends current={managed} onSaved={backends.reload} />}
      <h2>{t('admin.runtimes')}</h2>
      <Show loaded={runtimes}>
        {({ processes }) => (
          <DataTable
            rows={processes}
            empty={t('admin.noRuntimes')}
            head={
              <>
                <th>{t('admin.process')}</th>
                <th>{t('model')}</th>
                <th>{t('status')}</th>
                <th class="num">PID</th>
                <th class="num">{t('admin.port')}</th>
                <th class="num">{t('admin.restarts')}</th>
                <th>{t('admin.lastError')}</th>
              </>
            }
            row={(p) => (
              <tr>
                <td>
                  {p.name} ({p.kind})
                </td>
                <td>{p.model}</td>
                <td>{p.state}</td>
                <td class="num">{p.pid ?? '—'}</td>
                <td class="num">{p.port ?? '—'}</td>
                <td class="num">{p.restarts}</td>
                <td>{p.last_error ?? '—'}</td>
              </tr>
            )}
          />
        )}
      </Show>
    </Page>
  );
}

/** The backend's circuit breaker in the process that answered (each process keeps its own). */
function BreakerCell({ breaker }: { breaker: Backend['breaker'] }) {
  if (!breaker) return <td>{t('breaker.off')}</td>;
  if (breaker.state === 'open') return <td class="bad">{t('breaker.open', { time: formatTime(breaker.probe_at) })}</td>;
  if (breaker.state === 'half-open') return <td>{t('breaker.halfOpen')}</td>;
  return <td class="ok">{t('breaker.closed', { failures: breaker.failures, attempts: breaker.attempts })}</td>;
}

interface Row {
  model: string;
  url: string;
  weight: string;
  enabled: boolean;
  /** Blank keeps the stored key; typed text replaces it. */
  api_key: string;
  has_api_key: boolean;
  remove_key: boolean;
}

/** The admin-managed backends (PUT replaces the whole set; every replica follows within a second). Keys are write-only. */
function ManagedBackends({ current, onSaved }: { current: Backend[]; onSaved: () => void }) {
  const toRows = (list: Backend[]): Row[] =>
    list.map((b) => ({
      model: b.model,
      url: b.url,
      weight: String(b.weight ?? 1),
      enabled: b.enabled !== false,
      api_key: '',
      has_api_key: !!b.has_api_key,
      remove_key: false,
    }));
  const [rows, setRows] = useState<Row[]>(toRows(current));
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => setRows(toRows(current)), [current]);
  const edit = (i: number, change: Partial<Row>) => setRows(rows.map((r, j) => (j === i ? { ...r, ...change } : r)));

  async function save(e: Event) {
    e.preventDefault();
    setSaved(false);
    const backends = rows.map((r) => ({
      model: r.model.trim(),
      url: r.url.trim(),
      weight: Number(r.weight),
      enabled: r.enabled,
      ...(r.api_key ? { api_key: r.api_key } : r.remove_key ? { api_key: null } : {}),
    }));
    try {
      await api('PUT', '/api/admin/router/backends', { backends });
      setError(null);
      setSaved(true);
      onSaved();
    } catch (err) {
      setError(errorText(err));
    }
  }

  return (
    <form aria-labelledby="managed-heading" onSubmit={save}>
      <h2 id="managed-heading">{t('admin.managedBackends')}</h2>
      <table>
        <thead>
          <tr>
            <th>{t('model')}</th>
            <th>URL</th>
            <th>{t('admin.weight')}</th>
            <th>{t('admin.enabled')}</th>
            <th>{t('admin.apiKey')}</th>
            <th>
              <span class="visually-hidden">{t('actions')}</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr>
              <td>
                <input aria-label={`${t('model')} ${i + 1}`} value={r.model} onInput={(e) => edit(i, { model: e.currentTarget.value })} />
              </td>
              <td>
                <input aria-label={`URL ${i + 1}`} value={r.url} onInput={(e) => edit(i, { url: e.currentTarget.value })} />
              </td>
              <td>
                <input
                  aria-label={`${t('admin.weight')} ${i + 1}`}
                  inputMode="numeric"
                  size={4}
                  value={r.weight}
                  onInput={(e) => edit(i, { weight: e.currentTarget.value })}
                />
              </td>
              <td>
                <input
                  type="checkbox"
                  aria-label={`${t('admin.enabled')} ${i + 1}`}
                  checked={r.enabled}
                  onChange={(e) => edit(i, { enabled: e.currentTarget.checked })}
                />
              </td>
              <td>
                <input
                  type="password"
                  autocomplete="off"
                  aria-label={`${t('admin.apiKey')} ${i + 1}`}
                  placeholder={r.has_api_key ? t('admin.keyKept') : ''}
                  value={r.api_key}
                  onInput={(e) => edit(i, { api_key: e.currentTarget.value })}
                />
                {r.has_api_key && (
                  <label class="check">
                    <input type="checkbox" checked={r.remove_key} onChange={(e) => edit(i, { remove_key: e.currentTarget.checked })} />{' '}
                    {t('admin.removeKey')}
                  </label>
                )}
              </td>
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
        <button
          type="button"
          onClick={() =>
            setRows([...rows, { model: '', url: '', weight: '1', enabled: true, api_key: '', has_api_key: false, remove_key: false }])
          }
        >
          {t('admin.addRow')}
        </button>
        <button type="submit">{t('save')}</button>
      </p>
      <Alert>{error}</Alert>
      {saved && <Status>{t('saved')}</Status>}
    </form>
  );
}

/** Admin: router backends (health, load, last error) and supervised runtime processes. */
import { formatTime, t } from '../locale';
import { Page, Show, useGet } from '../ui';

interface Backend {
  model: string;
  url: string;
  source: string;
  healthy: boolean;
  inflight: number;
  consecutive_failures: number;
  last_error: string | null;
  last_probe_at: string | null;
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
  return (
    <Page title={t('nav.admin.health')}>
      <h2>{t('admin.backends')}</h2>
      <Show loaded={backends}>
        {({ backends: list }) =>
          list.length === 0 ? (
            <p>{t('none')}</p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th>{t('model')}</th>
                  <th>URL</th>
                  <th>{t('admin.source')}</th>
                  <th>{t('status')}</th>
                  <th class="num">{t('admin.inflight')}</th>
                  <th>{t('admin.lastProbe')}</th>
                  <th>{t('admin.lastError')}</th>
                </tr>
              </thead>
              <tbody>
                {list.map((b) => (
                  <tr>
                    <td>{b.model}</td>
                    <td>
                      <code>{b.url}</code>
                    </td>
                    <td>{b.source}</td>
                    <td class={b.healthy ? 'ok' : 'bad'}>
                      {b.healthy ? t('admin.healthy') : t('admin.down', { failures: b.consecutive_failures })}
                    </td>
                    <td class="num">{b.inflight}</td>
                    <td>{formatTime(b.last_probe_at)}</td>
                    <td>{b.last_error ?? '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Show>
      <h2>{t('admin.runtimes')}</h2>
      <Show loaded={runtimes}>
        {({ processes }) =>
          processes.length === 0 ? (
            <p>{t('admin.noRuntimes')}</p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th>{t('admin.process')}</th>
                  <th>{t('model')}</th>
                  <th>{t('status')}</th>
                  <th class="num">PID</th>
                  <th class="num">{t('admin.port')}</th>
                  <th class="num">{t('admin.restarts')}</th>
                  <th>{t('admin.lastError')}</th>
                </tr>
              </thead>
              <tbody>
                {processes.map((p) => (
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
                ))}
              </tbody>
            </table>
          )
        }
      </Show>
    </Page>
  );
}

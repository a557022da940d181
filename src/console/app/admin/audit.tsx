/** Admin: the audit log of every admin write, newest first, in cursor pages. */
import { withQuery } from '../api';
import { formatTime, t } from '../locale';
import { Page, Show, useCursor, useGet } from '../ui';

interface Entry {
  id: string;
  actor_id: string;
  actor_email: string;
  action: string;
  target: string;
  details: unknown;
  created_at: string;
}

export function AdminAudit() {
  const { cursor, Pager } = useCursor();
  const page = useGet<{ entries: Entry[]; next_cursor: string | null }>(withQuery('/api/admin/audit', { limit: 50, cursor }));
  return (
    <Page title={t('nav.admin.audit')}>
      <Show loaded={page}>
        {({ entries, next_cursor }) => (
          <>
            <table>
              <thead>
                <tr>
                  <th>{t('time')}</th>
                  <th>{t('admin.actor')}</th>
                  <th>{t('admin.action')}</th>
                  <th>{t('admin.target')}</th>
                  <th>{t('admin.details')}</th>
                </tr>
              </thead>
              <tbody>
                {entries.map((e) => (
                  <tr key={e.id}>
                    <td>{formatTime(e.created_at)}</td>
                    <td>{e.actor_email}</td>
                    <td>
                      <code>{e.action}</code>
                    </td>
                    <td>{e.target}</td>
                    <td>
                      <code>{JSON.stringify(e.details)}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            <Pager next={next_cursor} />
          </>
        )}
      </Show>
    </Page>
  );
}

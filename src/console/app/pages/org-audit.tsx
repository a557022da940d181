/** An organization's audit log for its owners and admins: who changed members, invites, keys and billing, newest first. */
import { withQuery } from '../api';
import { AuditDetails } from '../admin/audit';
import { formatTime, t } from '../locale';
import { type Org, useOrgPage } from '../org';
import { DataTable, Page, Show, useCursor, useGet } from '../ui';

interface Entry {
  id: string;
  actor_email: string | null;
  action: string;
  target: string | null;
  details: unknown;
  created_at: string;
}

export function OrgAudit({ id }: { id: string }) {
  useOrgPage(id);
  const path = `/api/orgs/${encodeURIComponent(id)}`;
  const org = useGet<Org>(path);
  const { cursor, Pager } = useCursor();
  const page = useGet<{ entries: Entry[]; next_cursor: string | null }>(withQuery(`${path}/audit`, { limit: 50, cursor }));
  return (
    <Page title={org.data ? t('orgs.audit.named', { org: org.data.name }) : t('orgs.audit.title')}>
      <p>
        <a href={`/console/orgs/${encodeURIComponent(id)}`}>{t('orgs.backToOrg')}</a>
      </p>
      <Show loaded={page}>
        {({ entries, next_cursor }) => (
          <>
            <DataTable
              rows={entries}
              empty={t('none')}
              data-testid="org-audit"
              head={
                <>
                  <th>{t('time')}</th>
                  <th>{t('admin.actor')}</th>
                  <th>{t('admin.action')}</th>
                  <th>{t('admin.target')}</th>
                  <th>{t('admin.details')}</th>
                </>
              }
              row={(e) => (
                <tr key={e.id}>
                  <td class="time">{formatTime(e.created_at)}</td>
                  <td>{e.actor_email ?? '—'}</td>
                  <td>
                    <code>{e.action}</code>
                  </td>
                  <td class="id">{e.target ?? '—'}</td>
                  <td>
                    <AuditDetails details={e.details} />
                  </td>
                </tr>
              )}
            />
            <Pager next={next_cursor} />
          </>
        )}
      </Show>
    </Page>
  );
}

/** Admin: the audit log of every admin write; an organization's page shows its own log with the same table. */
import { Fragment } from 'preact';
import { withQuery } from '../api';
import type { Key } from '../messages';
import { formatTime, t } from '../locale';
import { DataTable, Page, Show, useCursor, useGet } from '../ui';

interface Entry {
  id: string;
  actor_email: string | null;
  action: string;
  target: string | null;
  details: unknown;
  created_at: string;
}

export function AdminAudit() {
  return (
    <Page title={t('nav.admin.audit')}>
      <AuditLog path="/api/admin/audit" testId="audit" />
    </Page>
  );
}

/** An audit log (`path`: the platform's or an organization's), newest first, in cursor pages. */
export function AuditLog({ path, testId }: { path: string; testId: string }) {
  const { cursor, Pager } = useCursor();
  const page = useGet<{ entries: Entry[]; next_cursor: string | null }>(withQuery(path, { limit: 50, cursor }));
  return (
    <Show loaded={page}>
      {({ entries, next_cursor }) => (
        <>
          <DataTable
            rows={entries}
            empty={t('none')}
            data-testid={testId}
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
  );
}

/** An entry's details as labelled values in the page's language; nested values (price lists, changes) as compact JSON that wraps. */
export function AuditDetails({ details }: { details: unknown }) {
  if (details === null || details === undefined) return <>—</>;
  if (typeof details !== 'object' || Array.isArray(details)) return <code>{JSON.stringify(details)}</code>;
  const say = (v: unknown) =>
    typeof v === 'boolean' ? t(v ? 'product.yes' : 'product.no') : typeof v === 'string' ? v : v === null ? '—' : JSON.stringify(v);
  return (
    <dl class="details">
      {Object.entries(details).map(([name, value]) => {
        const key = `product.audit.${name}` as Key;
        return (
          <Fragment key={name}>
            <dt>{t(key) === key ? name : t(key)}</dt>
            <dd>{say(value)}</dd>
          </Fragment>
        );
      })}
    </dl>
  );
}

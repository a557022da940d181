/** An organization's audit log for its owners and admins: who changed members, invites, keys and billing, newest first. */
import { AuditLog } from '../admin/audit';
import { t } from '../locale';
import { type Org, useOrgPage } from '../org';
import { Page, useGet } from '../ui';

export function OrgAudit({ id }: { id: string }) {
  useOrgPage(id);
  const path = `/api/orgs/${encodeURIComponent(id)}`;
  const org = useGet<Org>(path);
  return (
    <Page title={org.data ? t('orgs.audit.named', { org: org.data.name }) : t('orgs.audit.title')}>
      <p>
        <a href={`/console/orgs/${encodeURIComponent(id)}`}>{t('orgs.backToOrg')}</a>
      </p>
      <AuditLog path={`${path}/audit`} testId="org-audit" />
    </Page>
  );
}

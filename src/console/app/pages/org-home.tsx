/** The dashboard of an organization's member: its role, its own spend limit there, and where its keys are; the billing stays with the owners and admins. */
import { currency, t } from '../locale';
import { useMe } from '../me';
import { formatMoney } from '../money';
import { type Org, roleName } from '../org';
import { Page, Show, useGet } from '../ui';
import type { Member } from './org-settings';

export function MemberHome({ org }: { org: Org }) {
  const me = useMe();
  const members = useGet<{ members: Member[] }>(`/api/orgs/${encodeURIComponent(org.id)}/members`);
  return (
    <Page title={org.name}>
      <p class="notice">{t('orgs.home.intro', { org: org.name, role: roleName(org.role) })}</p>
      <Show loaded={members}>
        {({ members: list }) => {
          const mine = list.find((m) => m.user_id === me.id);
          if (!mine) return null;
          return (
            <dl class="stats">
              <div>
                <dt>{t('orgs.home.spent')}</dt>
                <dd data-testid="member-spent">{formatMoney(Number(mine.spent), currency)}</dd>
              </div>
              <div>
                <dt>{t('orgs.home.limit')}</dt>
                <dd data-testid="member-limit">
                  {mine.spend_limit === null
                    ? t('orgs.noLimit')
                    : `${formatMoney(Number(mine.spend_limit), currency)} ${t(`keys.period.${mine.spend_period ?? 'total'}`)}`}
                </dd>
              </div>
            </dl>
          );
        }}
      </Show>
      <p class="actions">
        <a href="/console/keys">{t('orgs.home.keys')}</a>
        <a href={`/console/orgs/${encodeURIComponent(org.id)}`}>{t('orgs.home.org')}</a>
      </p>
    </Page>
  );
}

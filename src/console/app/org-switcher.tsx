/** The header's choice of account: personal, one of the caller's organizations, or making a new one. */
import { useLocation } from 'preact-iso';
import { t } from './locale';
import { useOrg } from './org';

const NEW_ORG = 'new';

export function OrgSwitcher() {
  const { orgs, current, choose } = useOrg();
  const { route } = useLocation();
  return (
    <label class="org-switch">
      <span class="visually-hidden">{t('orgs.switch')}</span>
      <select
        aria-label={t('orgs.switch')}
        data-testid="org-switch"
        value={current?.id ?? ''}
        onChange={(e) => {
          const value = e.currentTarget.value;
          if (value === NEW_ORG) {
            // The select keeps showing the account in use; the new one is chosen once it exists.
            e.currentTarget.value = current?.id ?? '';
            route('/console/orgs/new');
          } else choose(value || null);
        }}
      >
        <option value="">{t('orgs.personal')}</option>
        {orgs.map((org) => (
          <option key={org.id} value={org.id}>
            {org.name}
          </option>
        ))}
        <option value={NEW_ORG}>{t('orgs.new')}</option>
      </select>
    </label>
  );
}

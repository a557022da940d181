/** Organizations' ids are `org_…` (users' are not), so a wallet id says whose wallet it is. */
export const ORG_ID_PREFIX = 'org';

export const isOrgId = (id: string) => id.startsWith(`${ORG_ID_PREFIX}_`);

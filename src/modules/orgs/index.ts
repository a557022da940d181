export { createOrgsService, type OrgsService } from './orgs.service';
export { orgsRoutes } from './orgs.routes';
export { createOrgMoneyAudit } from './orgs.money-audit';
export { createOrgDirectory, type OrgDirectory } from './orgs.directory';
export { isOrgId } from './orgs.ids';

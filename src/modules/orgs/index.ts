export { createOrgsService, type OrgsService } from './orgs.service';
export { orgsRoutes } from './orgs.routes';

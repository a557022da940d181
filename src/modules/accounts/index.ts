export { createAccountsService, type AccountsService, type UserView } from './accounts.service';
export { loadPasswordHashing } from './accounts.passwords';
export { apiKeyNames } from './accounts.api-keys';
/** Named rate limiters for other modules: `namedLimiter(ctx, 'download').enforce(key)`. */
export { createLimiters, namedLimiter, namedLimits, type LimitName, TokenBucketLimiter } from '../../platform/http/rate-limit';
export { clientAddress } from '../../platform/http/client-address';
export { accountsRoutes } from './accounts.routes';
export { accountEmailRoutes } from './accounts.email.routes';
export { createPhoneCodes } from './accounts.phone';
export { phoneRoutes } from './accounts.phone.routes';
export { createOAuth } from './accounts.oauth';
export { createIdentities } from './accounts.identities';
export { oauthRoutes } from './accounts.oauth.routes';
export type { OrgMember, OrgMembership, OrgRole } from './accounts.org-port';

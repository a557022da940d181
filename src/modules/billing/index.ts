export { createBillingService, type BillingService, type CreditInput, type DebitUsageInput } from './billing.service';
export { billingRoutes, PROVIDER_BODY_PATHS } from './billing.routes';
export type { Grant, GrantAnswer, GrantRequest } from './grants';
export type { MoneyAudit, MoneyAuditAction, MoneyEvent } from './events';
export { redemptionRoutes } from './redemption.routes';

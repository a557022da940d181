export { createBillingService, type BillingService, type CreditInput, type DebitUsageInput } from './billing.service';
export { toMajor } from './money';
export { billingRoutes } from './billing.routes';

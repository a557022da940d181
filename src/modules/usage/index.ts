export { createCostReport, parseTime } from './usage.cost';
export { createUsageLog, type UsageLog } from './usage.log';
export { usageRoutes } from './usage.routes';

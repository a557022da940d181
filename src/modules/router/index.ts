export { createRouterService, validateChatBody, type ChatCaller, type ChatRequest, type ChatStream, type RouterDeps, type RouterService } from './router.service';
export { createCostReport, GROUP_KEYS, type CostRow } from './router.cost';
export { routerRoutes } from './router.routes';
export type { BackendView } from './router.backends';
export type { Chunk } from './router.meter';
export { rawJsonOf } from './router.upstream';
export { createUsageLog, type UsageLog } from './router.usage-log';
export { periodStart, type KeyLimits, type KeyLimitsSource } from './router.key-limits';
export { requestSilenceSeconds } from '../../config-router';

export { createRouterService, validateChatBody, type ChatCaller, type ChatRequest, type ChatStream, type RouterDeps, type RouterService } from './router.service';
export { routerRoutes } from './router.routes';
export type { BackendView } from './router.backends';
export { rawJsonOf } from './router.upstream';
export { requestSilenceSeconds } from './router.config';

export { createRouterService, validateChatBody, type RouterDeps, type RouterService } from './router.service';
export type { ChatCaller, ChatRequest, ChatStream } from './router.types';
export { errorEvent, type MessagesRequest, type MessagesStream } from './router.messages';
export type { MessageEvent } from './router.upstream';
export { routerRoutes } from './router.routes';
export type { BackendView } from './router.backends';
export { rawJsonOf } from './router.upstream';
export { requestSilenceSeconds } from '../../config-router';

export { createAgentsService, type AgentsService } from './agents.api';
export { agentAuthPlugin, agentPrincipal } from './agents.auth';
export { agentsRoutes } from './agents.routes';
export type { ChatModels, ChatRequest } from './agents.chat';
export type { BilledCaller, Principal } from './agents.service';
export type { Frame } from './agents.turns';

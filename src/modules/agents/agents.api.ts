import type { AppContext } from '../../app-context';
import type { ChatModels } from './agents.chat';
import type { Principal } from './agents.service';
import { createAgentsCrud } from './agents.service';
import { createTurns } from './agents.turns';

/** The Agents API: agents, sessions, events and the turns they run through `deps.models` (the router). */
export function createAgentsService(ctx: AppContext, deps: { models: ChatModels }) {
  const crud = createAgentsCrud(ctx);
  const turns = createTurns(ctx, crud, deps.models);
  return {
    ...crud,
    postEvent: turns.postEvent,
    streamEvent: turns.streamEvent,
    /** Deletes the session and stops its turn if one runs in this process. */
    async deleteSession(p: Principal, id: string) {
      const deleted = await crud.deleteSession(p, id);
      await turns.cancel(id);
      return deleted;
    },
  };
}

export type AgentsService = ReturnType<typeof createAgentsService>;

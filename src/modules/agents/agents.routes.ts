/** Agent API routes; paths as the official `openai` client's `client.beta.agents` calls them. */
import { Elysia, sse } from 'elysia';
import { AppError } from '../../platform/errors';
import { holdOpen } from '../../platform/http/listen';
import type { agentAuthPlugin } from './agents.auth';
import {
  AgentCreateBody,
  AgentUpdateBody,
  EventBody,
  IdParams,
  ListQuery,
  SessionCreateBody,
  SessionListQuery,
  SessionUpdateBody,
  TurnParams,
} from './agents.schemas';
import type { AgentsService } from './agents.api';

const tags = ['agents'];
const notImplemented = () => {
  throw new AppError('not_implemented', 'not implemented');
};

/** silenceSeconds: how long a streamed turn may stay silent (a model call that thinks), as a gateway request may. */
export const agentsRoutes = (deps: { agents: AgentsService; auth: ReturnType<typeof agentAuthPlugin>; silenceSeconds: number }) => {
  const { agents } = deps;
  return (
    new Elysia({ name: 'cpd/agents' })
      .use(deps.auth)
      // Recognized, unimplemented: 501, so a client learns the feature is missing, not that the id is. Static paths win over /v1/agents/:id.
      .all('/v1/vaults', notImplemented, { agentAuth: true, detail: { hide: true } })
      .all('/v1/vaults/*', notImplemented, { agentAuth: true, detail: { hide: true } })
      .all('/v1/agents/environments', notImplemented, { agentAuth: true, detail: { hide: true } })
      // `.all` is the router's last resort: a method's own route with a parameter (/v1/agents/:id)
      // wins over it, so the methods of /v1/agents/:id get the exact path explicitly.
      .get('/v1/agents/environments', notImplemented, { agentAuth: true, detail: { hide: true } })
      .post('/v1/agents/environments', notImplemented, { agentAuth: true, detail: { hide: true } })
      .delete('/v1/agents/environments', notImplemented, { agentAuth: true, detail: { hide: true } })
      .all('/v1/agents/environments/*', notImplemented, { agentAuth: true, detail: { hide: true } })
      .all('/v1/agents/sessions/:id/artifacts', notImplemented, { agentAuth: true, detail: { hide: true } })
      .all('/v1/agents/sessions/:id/artifacts/*', notImplemented, { agentAuth: true, detail: { hide: true } })

      .post(
        '/v1/agents',
        async ({ principal, body, set }) => {
          set.status = 201;
          return agents.createAgent(principal, body);
        },
        { agentAuth: true, body: AgentCreateBody, detail: { summary: 'Create an agent', tags } },
      )
      .get('/v1/agents', ({ principal, query }) => agents.listAgents(principal, query), {
        agentAuth: true,
        query: ListQuery,
        detail: { summary: 'List agents', tags },
      })

      .post(
        '/v1/agents/sessions',
        async ({ principal, body, set }) => {
          set.status = 201;
          return agents.createSession(principal, body);
        },
        { agentAuth: true, body: SessionCreateBody, detail: { summary: 'Create a session', tags } },
      )
      .get('/v1/agents/sessions', ({ principal, query }) => agents.listSessions(principal, query), {
        agentAuth: true,
        query: SessionListQuery,
        detail: { summary: 'List sessions', tags },
      })
      .get('/v1/agents/sessions/:id', ({ principal, params }) => agents.getSession(principal, params.id), {
        agentAuth: true,
        params: IdParams,
        detail: { summary: 'Get a session', tags },
      })
      .post('/v1/agents/sessions/:id', ({ principal, params, body }) => agents.updateSession(principal, params.id, body), {
        agentAuth: true,
        params: IdParams,
        body: SessionUpdateBody,
        detail: { summary: 'Update a session', tags },
      })
      .delete('/v1/agents/sessions/:id', ({ principal, params }) => agents.deleteSession(principal, params.id), {
        agentAuth: true,
        params: IdParams,
        detail: { summary: 'Delete a session', tags },
      })

      .post(
        '/v1/agents/sessions/:id/events',
        async ({ principal, params, body, set }) => {
          set.status = 201;
          return agents.postEvent(principal, params.id, body);
        },
        { agentAuth: true, params: IdParams, body: EventBody, detail: { summary: 'Post an event', tags } },
      )
      .post(
        '/v1/agents/sessions/:id/events/stream',
        async function* ({ principal, params, body, server, request }) {
          holdOpen(server, request, deps.silenceSeconds);
          // Refusals (400/404/409) throw before the first frame, so they are plain JSON errors.
          const frames = await agents.streamEvent(principal, params.id, body);
          for await (const frame of frames) yield sse(frame);
        },
        { agentAuth: true, params: IdParams, body: EventBody, detail: { summary: 'Post an event and stream the turn (SSE)', tags } },
      )

      .get('/v1/agents/sessions/:id/turns', ({ principal, params, query }) => agents.listTurns(principal, params.id, query), {
        agentAuth: true,
        params: IdParams,
        query: ListQuery,
        detail: { summary: 'List turns', tags },
      })
      .get('/v1/agents/sessions/:id/turns/:turnId', ({ principal, params }) => agents.getTurn(principal, params.id, params.turnId), {
        agentAuth: true,
        params: TurnParams,
        detail: { summary: 'Get a turn', tags },
      })
      .get('/v1/agents/sessions/:id/items', ({ principal, params, query }) => agents.listItems(principal, params.id, query), {
        agentAuth: true,
        params: IdParams,
        query: ListQuery,
        detail: { summary: 'List items', tags },
      })

      .get('/v1/agents/:id', ({ principal, params }) => agents.getAgent(principal, params.id), {
        agentAuth: true,
        params: IdParams,
        detail: { summary: 'Get an agent', tags },
      })
      .post('/v1/agents/:id', ({ principal, params, body }) => agents.updateAgent(principal, params.id, body), {
        agentAuth: true,
        params: IdParams,
        body: AgentUpdateBody,
        detail: { summary: 'Update an agent', tags },
      })
      .delete('/v1/agents/:id', ({ principal, params }) => agents.deleteAgent(principal, params.id), {
        agentAuth: true,
        params: IdParams,
        detail: { summary: 'Delete an agent', tags },
      })
  );
};

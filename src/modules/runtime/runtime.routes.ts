import { Elysia, t } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import type { Supervisor } from './runtime.supervisor';

const ProcessSchema = t.Object({
  name: t.String(),
  kind: t.Union([t.Literal('engine'), t.Literal('router')]),
  model: t.String(),
  gpu: t.Union([t.String(), t.Null()]),
  state: t.Union([t.Literal('starting'), t.Literal('ready'), t.Literal('backoff'), t.Literal('failed'), t.Literal('stopped')]),
  pid: t.Union([t.Integer(), t.Null()]),
  port: t.Union([t.Integer(), t.Null()]),
  restarts: t.Integer(),
  last_exit: t.Union([t.Object({ code: t.Union([t.Integer(), t.Null()]), signal: t.Union([t.String(), t.Null()]), at: t.String() }), t.Null()]),
  last_error: t.Union([t.String(), t.Null()]),
  started_at: t.Union([t.String(), t.Null()]),
  ready_at: t.Union([t.String(), t.Null()]),
});

export const runtimeRoutes = (deps: { auth: ReturnType<typeof authPlugin>; supervisor: Supervisor }) =>
  new Elysia({ name: 'cpd/runtime' }).use(deps.auth).get('/api/admin/runtimes', () => ({ processes: deps.supervisor.status() }), {
    auth: ['admin'],
    detail: { summary: 'Supervised engine and router processes', tags: ['runtime'] },
    response: { 200: t.Object({ processes: t.Array(ProcessSchema) }) },
  });

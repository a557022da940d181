import { Elysia } from 'elysia';
import { type authPlugin, recordsOwner } from '../../platform/http/auth';
import type { AuditService } from '../audit';
import type { CapturesService } from './captures.service';
import * as s from './captures.schemas';

/** The captures API (docs/captures.md). POST /v1/router/replay is the gateway's. */
export const capturesRoutes = (deps: { auth: ReturnType<typeof authPlugin>; captures: CapturesService; audit: AuditService }) =>
  new Elysia({ name: 'cpd/captures' })
    .use(deps.auth)
    .get('/api/captures', ({ caller, query }) => deps.captures.list(recordsOwner(caller), query), {
      auth: ['session', 'key'],
      query: s.CaptureQuery,
      response: { 200: s.CaptureList },
      detail: { summary: 'Your captured requests, newest first', tags: ['captures'] },
    })
    .get('/api/captures/:id', ({ caller, params }) => deps.captures.get(recordsOwner(caller), params.id), {
      auth: ['session', 'key'],
      params: s.CaptureIdParams,
      response: { 200: s.CaptureDetail },
      detail: { summary: 'One of your captures with its request and answer', tags: ['captures'] },
    })
    .get('/api/admin/captures', ({ query }) => deps.captures.list(null, query), {
      auth: ['admin'],
      query: s.AdminCaptureQuery,
      response: { 200: s.CaptureList },
      detail: { summary: "Everyone's captured requests, newest first", tags: ['captures'] },
    })
    .get('/api/admin/captures/:id', ({ params }) => deps.captures.get(null, params.id), {
      auth: ['admin'],
      params: s.CaptureIdParams,
      response: { 200: s.CaptureDetail },
      detail: { summary: 'Any capture with its request and answer', tags: ['captures'] },
    })
    .get('/api/admin/router/capture', () => deps.captures.settings(), {
      auth: ['admin'],
      detail: { summary: 'The capture rules and retention', tags: ['captures'] },
    })
    .put(
      '/api/admin/router/capture',
      async ({ caller, body }) => {
        const settings = await deps.captures.setSettings(body);
        await deps.audit.record({ actor: { userId: caller.userId, email: caller.email }, action: 'router.capture', target: 'router', details: { ...settings } });
        return settings;
      },
      {
        auth: ['admin'],
        body: s.CaptureSettingsBody,
        detail: { summary: 'Replace the capture rules and retention; every replica follows within 5 s', tags: ['captures'] },
      },
    );

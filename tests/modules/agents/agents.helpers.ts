/** Shared setup for the agent turn tests: the real app, a fake upstream behind the real router, SSE parsing. */
import { createParser } from 'eventsource-parser';
import type { Clock } from '../../../src/platform/clock';
import { createTestApp, type TestApp } from '../../support/app';
import type { DbKind } from '../../support/db';
import { type FakeUpstream, startFakeUpstream } from '../../support/fake-upstream';

export const MODEL = 'fake-model';
export const ANONYMOUS_UNLIMITED = 'agents_anonymous=1000000/1m';
/** 1000 per million tokens: one token costs 1000 micro-units. */
export const PRICE_PER_MILLION = 1000;
export const WEATHER_TOOL = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

export interface Frame {
  event: string;
  data: any;
}

export interface AgentsHarness {
  t: TestApp;
  up: FakeUpstream;
  close(): Promise<void>;
}

export async function startAgentsApp(kind: DbKind, env: Record<string, string> = {}, opts: { clock?: Clock } = {}): Promise<AgentsHarness> {
  const up = await startFakeUpstream({ models: [MODEL] });
  // These tests drive turns anonymously from one (socketless) address, far past the per-address
  // limit of open mode; that limit has its own test in agents.auth.test.ts.
  const t = await createTestApp(kind, { MODEL_BACKENDS: `${MODEL}=${up.url}`, RATE_LIMITS: ANONYMOUS_UNLIMITED, ...env }, opts);
  await t.services.pricing.setModelPrices([{ slug: MODEL, unit: 'per_million_tokens', price: PRICE_PER_MILLION }]);
  return {
    t,
    up,
    async close() {
      await t.close();
      await up.close();
    },
  };
}

/** Parses an SSE body with eventsource-parser; also checks every data line is one line of JSON. */
export function parseSse(text: string): Frame[] {
  const frames: Frame[] = [];
  const parser = createParser({
    onEvent: (e) => frames.push({ event: e.event ?? 'message', data: JSON.parse(e.data) }),
  });
  parser.feed(text);
  for (const line of text.split('\n')) if (line.startsWith('data:')) JSON.parse(line.slice(5));
  return frames;
}

export async function streamEvent(t: TestApp, sessionId: string, body: unknown, init: { token?: string; signal?: AbortSignal } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  return t.app.handle(
    new Request(`http://localhost/v1/agents/sessions/${sessionId}/events/stream`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal: init.signal,
    }),
  );
}

export async function newSession(t: TestApp, agent: Record<string, unknown>, token?: string) {
  const a = await t.request('POST', '/v1/agents', { token, body: { model: MODEL, ...agent } });
  if (a.status !== 201) throw new Error(`agent create failed: ${a.text}`);
  const s = await t.request('POST', '/v1/agents/sessions', { token, body: { agent_id: a.body.id } });
  if (s.status !== 201) throw new Error(`session create failed: ${s.text}`);
  return { agent: a.body, session: s.body };
}

export const getSession = async (t: TestApp, id: string, token?: string) => (await t.request('GET', `/v1/agents/sessions/${id}`, { token })).body;

export const isSettled = (s: any) => s.status !== 'in_progress';

/** The weather conversation: a tool call first, a sentence once the tool answered. */
export function weatherBehaviour(body: Record<string, any>) {
  const last = body.messages.at(-1);
  if (last?.role === 'tool') return { content: 'It is sunny in Paris.' };
  if (body.tools) return { toolCalls: [{ id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' }] };
  return { content: 'No tools here.' };
}

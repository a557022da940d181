/**
 * The official `openai` client (pinned 7.57.0, which has client.beta.agents) against the real
 * app on a real port, unmodified: agent and session create, retrieve, list (with its cursor
 * pagination) and delete.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { createTestApp, type TestApp } from '../../support/app';

const CLOUD_KEY = 'agent-cloud-key-for-the-openai-client';

describe('openai client.beta.agents against cpd', () => {
  let t: TestApp;
  let client: OpenAI;
  beforeAll(async () => {
    t = await createTestApp('postgres', { AGENT_CLOUD_API_KEY: CLOUD_KEY });
    t.app.listen({ hostname: '127.0.0.1', port: 0 });
    client = new OpenAI({ baseURL: `http://127.0.0.1:${t.app.server!.port}/v1`, apiKey: CLOUD_KEY, maxRetries: 0 });
  });
  afterAll(async () => {
    await t.app.stop(true);
    await t.close();
  });

  test('agents: create, retrieve, update, list with auto-pagination, delete', async () => {
    const agent = await client.beta.agents.create({
      model: 'fake-model',
      name: 'client agent',
      instructions: 'Answer briefly.',
      metadata: { source: 'openai-client' },
    });
    expect(agent.id).toMatch(/^agent_/);
    expect(agent.object).toBe('agent');
    expect(agent.model).toBe('fake-model');
    expect(agent.metadata).toEqual({ source: 'openai-client' });
    // ISO timestamps (cpd's format), not Unix seconds.
    expect(new Date(agent.created_at as unknown as string).toISOString()).toBe(agent.created_at as unknown as string);

    const again = await client.beta.agents.retrieve(agent.id);
    expect(again.id).toBe(agent.id);
    expect(again.instructions).toBe('Answer briefly.');

    const updated = await client.beta.agents.update(agent.id, { name: 'renamed' });
    expect(updated.name).toBe('renamed');

    const more: string[] = [];
    for (let i = 0; i < 4; i++) more.push((await client.beta.agents.create({ model: 'fake-model' })).id);
    const seen: string[] = [];
    for await (const a of client.beta.agents.list({ limit: 2 })) seen.push(a.id);
    expect(seen).toEqual([...more].reverse().concat(agent.id));

    const page = await client.beta.agents.list({ limit: 2, order: 'asc' });
    expect(page.data.map((a) => a.id)).toEqual([agent.id, more[0]!]);
    expect(page.hasNextPage()).toBe(true);

    const deleted = await client.beta.agents.delete(agent.id);
    expect(deleted).toEqual({ id: agent.id, object: 'agent.deleted', deleted: true });
    const missing = await client.beta.agents.retrieve(agent.id).catch((e) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test('sessions: create, retrieve, list, delete', async () => {
    const agent = await client.beta.agents.create({ model: 'fake-model' });
    const session = await client.beta.agents.sessions.create({
      agent_id: agent.id,
      metadata: { ticket: '42' },
      environment: { type: 'openai_hosted' } as never,
    });
    expect(session.id).toMatch(/^sess_/);
    expect(session.object).toBe('agent.session');
    expect(session.status).toBe('idle');
    expect(session.agent.id).toBe(agent.id);
    expect(session.metadata).toEqual({ ticket: '42' });

    const again = await client.beta.agents.sessions.retrieve(session.id);
    expect(again.id).toBe(session.id);

    const second = await client.beta.agents.sessions.create({ agent_id: agent.id, environment: { type: 'openai_hosted' } as never });
    const ids: string[] = [];
    for await (const s of client.beta.agents.sessions.list({ agent_id: agent.id, limit: 1 })) ids.push(s.id);
    expect(ids).toEqual([second.id, session.id]);

    const deleted = await client.beta.agents.sessions.delete(session.id);
    expect(deleted).toEqual({ id: session.id, object: 'agent.session.deleted', deleted: true });
    expect(await client.beta.agents.sessions.retrieve(session.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test('a wrong key is an AuthenticationError', async () => {
    const wrong = new OpenAI({ baseURL: client.baseURL, apiKey: 'nope', maxRetries: 0 });
    expect(await wrong.beta.agents.list().catch((e) => e)).toBeInstanceOf(OpenAI.AuthenticationError);
  });
});

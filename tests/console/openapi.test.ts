/**
 * The OpenAPI document at /api/docs/json as a reader of /api/docs needs it: every operation says
 * what it does, every route that needs a credential names its security scheme (so Swagger UI's
 * Authorize button applies to it), and the /v1 bodies are described with examples.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../support/app';

let t: TestApp;
let spec: {
  paths: Record<string, Record<string, { summary?: string; security?: Array<Record<string, string[]>>; requestBody?: { content?: Record<string, { schema?: unknown; example?: unknown }> }; 'x-cpd-auth'?: string[] }>>;
  components?: { securitySchemes?: Record<string, { type: string; scheme?: string; in?: string; name?: string }> };
};

beforeAll(async () => {
  t = await createTestApp();
  spec = (await t.request('GET', '/api/docs/json')).body;
});
afterAll(() => t.close());

const operations = () =>
  Object.entries(spec.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, op })));

describe('/api/docs/json', () => {
  test('declares a bearer and a cookie security scheme', () => {
    expect(spec.components?.securitySchemes?.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(spec.components?.securitySchemes?.session).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'cpd_session' });
    expect(spec.components?.securitySchemes?.apiKeyHeader).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-api-key' });
    expect(spec.paths['/v1/messages']?.post?.security).toEqual([{ bearer: [] }, { apiKeyHeader: [] }]);
  });

  test('every operation has a summary', () => {
    expect(operations().filter(({ op }) => !op.summary?.trim()).map(({ name }) => name)).toEqual([]);
  });

  test('every route that needs a credential names its security', () => {
    const protectedOps = operations().filter(({ op }) => op['x-cpd-auth']);
    expect(protectedOps.length).toBeGreaterThan(20);
    expect(protectedOps.filter(({ op }) => !op.security?.length).map(({ name }) => name)).toEqual([]);
  });

  test('the /v1 request bodies are described, with an example', () => {
    for (const name of ['/v1/chat/completions', '/v1/embeddings', '/v1/responses', '/v1/messages', '/v1/messages/count_tokens']) {
      const body = spec.paths[name]?.post?.requestBody?.content?.['application/json'];
      expect(body?.schema, name).toBeDefined();
      expect(body?.example, name).toBeDefined();
    }
  });

  test('the agents API bodies are described, with an example', () => {
    for (const name of ['/v1/agents', '/v1/agents/sessions', '/v1/agents/sessions/{id}/events']) {
      const schema = spec.paths[name]?.post?.requestBody?.content?.['application/json']?.schema as { examples?: unknown[] } | undefined;
      expect(schema?.examples?.length, name).toBeGreaterThan(0);
    }
  });

  test('the usage CSV export is listed', () => {
    expect(spec.paths['/api/usage/export.csv']?.get?.summary).toBeTruthy();
  });
});

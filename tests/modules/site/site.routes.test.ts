import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../../support/app';
import { DB_KINDS } from '../../support/db';

for (const kind of DB_KINDS) {
  describe(`site routes (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(kind, { SITE: 'cn' });
    });
    afterAll(() => t.close());

    test('healthz answers ok while the database is reachable', async () => {
      const res = await t.request('GET', '/healthz');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ok' });
      expect(res.headers.get('x-request-id')).toBeTruthy();
    });

    test('site metadata follows SITE', async () => {
      const res = await t.request('GET', '/api/site');
      expect(res.body).toMatchObject({ site: 'cn', currency: 'CNY', features: { invoices: true, receipts: false, sandbox_payments: true, open_agents: true } });
    });

    test('changelog comes from the embedded CHANGELOG.md', async () => {
      const res = await t.request('GET', '/api/changelog');
      expect(res.status).toBe(200);
      expect(res.body.entries.length).toBeGreaterThan(0);
      expect(res.body.entries[0]).toHaveProperty('version');
      expect(Array.isArray(res.body.entries[0].changes)).toBe(true);
    });

    test('unknown route is a JSON 404', async () => {
      const res = await t.request('GET', '/api/nothing-here');
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toContain('application/json');
      expect(res.body).toEqual({ error: expect.any(String) });
    });
  });
}

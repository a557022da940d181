/** platform/db's followChanges on a real database: one read at start, then one per NOTIFY from any connection. */
import { describe, expect, test } from 'bun:test';
import { followChanges } from '../../src/platform/db';
import { createTestContext } from '../support/app';
import { DB_KINDS } from '../support/db';
import { waitFor } from '../support/wait';

for (const kind of DB_KINDS) {
  describe(`followChanges (${kind})`, () => {
    test('reads once at start (it read twice: before the LISTEN and at its first onListen), then once per NOTIFY', async () => {
      const t = await createTestContext(kind);
      try {
        let reads = 0;
        await followChanges(t.ctx, 'cpd_test_follow', async () => void reads++, 'test cache');
        expect(reads).toBe(1);
        for (const expected of [2, 3]) {
          await t.ctx.database.notify('cpd_test_follow', 'changed');
          await waitFor(() => reads, `read ${expected}, after a NOTIFY`, { until: (n) => n >= expected });
          expect(reads).toBe(expected);
        }
      } finally {
        await t.close();
      }
    });

    test('a failing first read fails the start; later failing reads are logged and the cache keeps following', async () => {
      const t = await createTestContext(kind);
      try {
        await expect(followChanges(t.ctx, 'cpd_test_follow_a', async () => Promise.reject(new Error('cannot read')), 'test cache')).rejects.toThrow('cannot read');
        let reads = 0;
        await followChanges(t.ctx, 'cpd_test_follow_b', async () => {
          reads++;
          if (reads === 2) throw new Error('read failed once');
        }, 'test cache');
        await t.ctx.database.notify('cpd_test_follow_b', 'changed');
        await waitFor(() => t.logs.some((l) => l.includes('test cache reload failed')), 'the failed reload logged');
        await t.ctx.database.notify('cpd_test_follow_b', 'changed');
        await waitFor(() => reads, 'a read after the failed one', { until: (n) => n === 3 });
      } finally {
        await t.close();
      }
    });
  });
}

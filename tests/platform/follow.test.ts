/**
 * platform/db's followChanges on a real database: one read at start, then one per NOTIFY from any
 * connection; and serialReload, which keeps those reads in order.
 */
import { describe, expect, test } from 'bun:test';
import { followChanges, serialReload } from '../../src/platform/db';
import { createTestContext } from '../support/app';
import { DB_KINDS } from '../support/db';
import { waitFor } from '../support/wait';

/**
 * A cache of one value whose reads the test finishes by hand: `reads[i].finish(v)` completes the
 * i-th read, which then stores v (what the database held when that read ran).
 */
function handReadCache() {
  const reads: Array<{ finish: (value: number) => void; fail: (err: Error) => void }> = [];
  let value = 0;
  let running = 0;
  let overlapped = false;
  const reload = serialReload(async () => {
    running++;
    if (running > 1) overlapped = true;
    try {
      value = await new Promise<number>((resolve, reject) => reads.push({ finish: resolve, fail: reject }));
    } finally {
      running--;
    }
  });
  return { reload, reads, value: () => value, overlapped: () => overlapped };
}

describe('serialReload', () => {
  test('a call while a read runs gets one more read after it: the older answer never lands last', async () => {
    const c = handReadCache();
    const first = c.reload(); // began before the change
    const second = c.reload(); // asked after the change: must not be answered by the first read
    const third = c.reload(); // shares the second's read
    expect(c.reads).toHaveLength(1);
    c.reads[0]!.finish(1);
    await first;
    await waitFor(() => c.reads.length, 'the read after the first', { until: (n) => n === 2 });
    c.reads[1]!.finish(2);
    await Promise.all([second, third]);
    expect(c.value()).toBe(2);
    expect(c.reads).toHaveLength(2);
    expect(c.overlapped()).toBe(false);
    // Idle again: the next call starts a read at once.
    const fourth = c.reload();
    expect(c.reads).toHaveLength(3);
    c.reads[2]!.finish(3);
    await fourth;
    expect(c.value()).toBe(3);
  });

  test('a failed read fails its own callers only; the read queued behind it still runs', async () => {
    const c = handReadCache();
    const first = c.reload();
    const second = c.reload();
    c.reads[0]!.fail(new Error('connection lost'));
    await expect(first).rejects.toThrow('connection lost');
    await waitFor(() => c.reads.length, 'the queued read', { until: (n) => n === 2 });
    c.reads[1]!.finish(7);
    await second;
    expect(c.value()).toBe(7);
  });
});

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

    test('a NOTIFY heard while a read runs is answered by a read after it, never by the running one', async () => {
      const t = await createTestContext(kind);
      try {
        const c = handReadCache();
        let calls = 0;
        const reload = () => {
          calls++;
          return c.reload();
        };
        const started = followChanges(t.ctx, 'cpd_test_follow_order', reload, 'test cache');
        await waitFor(() => c.reads.length, 'the first read', { until: (n) => n === 1 });
        await t.ctx.database.notify('cpd_test_follow_order', 'changed');
        await t.ctx.database.notify('cpd_test_follow_order', 'changed again');
        // Both are heard while the first read is out; neither starts a read beside it.
        await waitFor(() => calls, 'both NOTIFYs heard', { until: (n) => n === 3 });
        expect(c.reads).toHaveLength(1);
        c.reads[0]!.finish(1);
        await started;
        await waitFor(() => c.reads.length, 'one read for both NOTIFYs', { until: (n) => n === 2 });
        c.reads[1]!.finish(2);
        await waitFor(() => c.value(), 'the later answer kept', { until: (v) => v === 2 });
        expect(c.overlapped()).toBe(false);
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

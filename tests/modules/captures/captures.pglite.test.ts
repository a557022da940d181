/** Captures on the embedded database (PGlite, `cpd serve` without DATABASE_URL): capture, list, replay, sweep. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Harness } from '../gateway/gateway-harness';
import { manualClock } from '../../support/clock';
import { captureRows, capturingUser, replay, settle, startCaptureHarness } from './captures-harness';

const clock = manualClock();
let h: Harness;

beforeAll(async () => {
  h = await startCaptureHarness({ clock, kind: 'pglite' });
});
afterAll(async () => {
  await h.close();
});

describe('captures on PGlite', () => {
  test('captured, listed, replayed, swept', async () => {
    const u = await capturingUser(h);
    await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'embedded' }] });
    await settle(h);
    const [original] = await captureRows(h, u.user.id);
    expect((await h.t.request('GET', '/api/captures', { token: u.captureKey.key })).body.captures.map((c: { id: string }) => c.id)).toEqual([original!.id]);
    const again = await replay(h, u.captureKey.key, { capture_id: original!.id, model: 'm2' });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-replay-of')).toBe(original!.id);
    await settle(h);
    expect(await captureRows(h, u.user.id)).toHaveLength(2);
    clock.advance(31 * 86_400_000);
    expect(await h.t.services.captures.sweep()).toBe(2);
    expect(await captureRows(h, u.user.id)).toEqual([]);
  });
});

/**
 * Captures kept in an S3 bucket (s3rver, a local server speaking the S3 protocol): sealed at rest
 * (the bucket's files on disk hold no plaintext), read back, replayed, deleted by the sweep.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import type { Harness } from '../gateway/gateway-harness';
import { manualClock } from '../../support/clock';
import { makeUser } from '../../support/make';
import { captureRows, capturingUser, replay, settle, startCaptureHarness } from './captures-harness';

let server: S3rver;
let dir: string;
let h: Harness;
const clock = manualClock();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cpd-s3rver-'));
  server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: join(dir, 'data'), configureBuckets: [{ name: 'captures', configs: [] }] });
  const address = (await server.run()) as AddressInfo;
  h = await startCaptureHarness({
    clock,
    env: { STORAGE_URL: 's3://captures/cpd', S3_ENDPOINT: `http://127.0.0.1:${address.port}`, S3_REGION: 'us-east-1', S3_ACCESS_KEY_ID: 'S3RVER', S3_SECRET_ACCESS_KEY: 'S3RVER' },
  });
});
afterAll(async () => {
  await h.close();
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Every file s3rver keeps for the bucket, as text. */
function bucketFiles(root: string): string[] {
  return readdirSync(root).flatMap((name) => {
    const path = join(root, name);
    return statSync(path).isDirectory() ? bucketFiles(path) : [readFileSync(path, 'utf8')];
  });
}

describe('captures on S3', () => {
  test('stored sealed in the bucket, read back, replayed, swept', async () => {
    expect(h.t.services.store.kind).toBe('s3');
    h.up.set({ content: 'bucket words here' });
    const u = await capturingUser(h);
    const s = await u.capturing.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'plaintext-marker' }], stream: true });
    for await (const _ of s);
    await settle(h);
    const [original] = await captureRows(h, u.user.id);
    expect(await h.t.services.store.exists(original!.object_key)).toBe(true);
    const files = bucketFiles(join(dir, 'data'));
    expect(files.some((f) => f.startsWith('v1.'))).toBe(true);
    for (const f of files) for (const plain of ['plaintext-marker', 'bucket words', u.captureKey.key]) expect(f).not.toContain(plain);

    const shown = await h.t.request('GET', `/api/captures/${original!.id}`, { token: u.captureKey.key });
    expect(shown.body.request.messages[0].content).toBe('plaintext-marker');
    expect(shown.body.response.text).toBe('bucket words here');

    const again = await replay(h, u.captureKey.key, { capture_id: original!.id, model: 'm2' });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-replay-of')).toBe(original!.id);
    expect(again.frames.at(-1)).toBe('[DONE]');
    await settle(h);
    const rows = await captureRows(h, u.user.id);
    expect(rows.map((r) => [r.model, r.replay_of])).toEqual([
      ['m1', null],
      ['m2', original!.id],
    ]);

    const admin = await makeUser(h.t, { admin: true });
    expect((await h.t.request('GET', '/api/admin/captures', { token: admin.token })).body.captures).toHaveLength(2);
    clock.advance(31 * 86_400_000);
    expect(await h.t.services.captures.sweep()).toBe(2);
    for (const r of rows) expect(await h.t.services.store.exists(r.object_key)).toBe(false);
    expect(await captureRows(h, u.user.id)).toEqual([]);
  });
});

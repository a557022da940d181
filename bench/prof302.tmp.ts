import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const { createTestApp } = await import('../tests/support/app');
const { makeApiKey, makeUser } = await import('../tests/support/make');
const { publishArtifact } = await import('../src/modules/registry');
const t = await createTestApp('postgres', { RATE_LIMITS: 'download=1000000000/1s', LOG_LEVEL: 'warn' });
const dir = mkdtempSync(join(tmpdir(), 'cpd-prof-'));
const file = join(dir, 'model.gguf');
writeFileSync(file, 'weights');
await publishArtifact(t.ctx, t.services.store, { path: file, slug: 'model-07', quant: 'int4', sdk: 'v1.0', description: 'x' });
await t.services.registry.reload();
const user = await makeUser(t);
const { key } = await makeApiKey(t, user.id);
const url = 'http://127.0.0.1/api/models/model-07/download?quant=int4&sdk=v1.0';
const N = Number(process.env.N ?? 100000);
const path = process.env.P ?? 'dl';
for (let round = 0; round < 3; round++) {
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const req = path === 'dl' ? new Request(url, { headers: { authorization: `Bearer ${key}` } }) : new Request('http://127.0.0.1/api/models');
    const res = await t.app.handle(req);
    if (res.status >= 400) throw new Error(String(res.status));
    await res.arrayBuffer();
  }
  console.log(path, ((performance.now() - t0) * 1000 / N).toFixed(2), 'µs/req');
}
await t.close();
process.exit(0);

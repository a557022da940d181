/**
 * ZIP download throughput and memory (issue 4), in one run:
 *   1. MB/s of GET /api/models/{slug}/download (a directory: our STORE ZIP64 stream) over
 *      loopback ÷ MB/s of a plain Bun.file response of the stored weight object (target ≥ 0.8);
 *   2. peak RSS growth of the server process while it streams the multi-GiB bundle (≤ 64 MB).
 * The client runs in a child process (this file in "fetch" mode) and discards what it reads.
 * The bundle's weight.bin is SIZE_GIB GiB (default 3) of a 64 MiB random block repeated.
 *   bun bench/zip.ts                (SIZE_GIB=3 ROUNDS=3)
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listenOptions } from '../src/platform/http/listen';

const SIZE_GIB = Number(process.env.SIZE_GIB ?? 3);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

if (process.argv[2] === 'fetch') {
  // Child: download the URL once, print {bytes, seconds}.
  const [, , , url, auth] = process.argv;
  const start = performance.now();
  const res = await fetch(url!, { headers: auth ? { authorization: auth } : {} });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  let bytes = 0;
  for await (const chunk of res.body!) bytes += chunk.length;
  console.log(JSON.stringify({ bytes, seconds: (performance.now() - start) / 1000, length: Number(res.headers.get('content-length')) }));
  process.exit(0);
}

async function download(url: string, auth?: string) {
  const proc = Bun.spawn([process.execPath, import.meta.path, 'fetch', url, ...(auth ? [auth] : [])], { stdout: 'pipe', stderr: 'inherit' });
  const out = await new Response(proc.stdout).text();
  if ((await proc.exited) !== 0) throw new Error(`download of ${url} failed`);
  const r = JSON.parse(out) as { bytes: number; seconds: number; length: number };
  if (r.length && r.bytes !== r.length) throw new Error(`short body: ${r.bytes} of ${r.length}`);
  return r;
}

const { createTestApp } = await import('../tests/support/app');
const { makeApiKey, makeUser } = await import('../tests/support/make');
const { publishArtifact } = await import('../src/modules/registry');
const { createFsStore } = await import('../src/platform/storage');

const dir = mkdtempSync(join(tmpdir(), 'cpd-bench-zip-'));
const t = await createTestApp('postgres', { LOG_LEVEL: 'warn', RATE_LIMITS: 'download=1000/1s' });
let bare: ReturnType<typeof Bun.serve> | null = null;
const server = t.app.listen(listenOptions('127.0.0.1', 0)); // as `cpd serve` listens
try {
  const bundle = join(dir, 'bundle');
  const weight = join(bundle, 'weight.bin');
  Bun.spawnSync(['mkdir', '-p', bundle]);
  writeFileSync(join(bundle, 'config.json'), JSON.stringify({ format: 'aria-quant-bundle', format_version: 2 }));
  writeFileSync(join(bundle, 'tokenizer.json'), '{}');
  const block = new Uint8Array(64 << 20);
  for (let i = 0; i < block.length; i += 65536) crypto.getRandomValues(block.subarray(i, i + 65536));
  const fd = openSync(weight, 'w');
  for (let i = 0; i < SIZE_GIB * 16; i++) writeSync(fd, block);
  closeSync(fd);
  console.log(`publishing a ${SIZE_GIB} GiB bundle…`);
  await publishArtifact(t.ctx, t.services.store, { path: bundle, slug: 'big', quant: 'int4', sdk: 'v1.0' });
  await t.services.registry.reload();
  rmSync(bundle, { recursive: true, force: true });

  const artifact = await t.services.registry.resolveArtifact('big', 'int4', 'v1.0');
  const objectPath = (t.services.store as ReturnType<typeof createFsStore>).pathOf(artifact.files.find((f) => f.path === 'weight.bin')!.objectKey);
  bare = Bun.serve({ hostname: '127.0.0.1', port: 0, development: false, fetch: () => new Response(Bun.file(objectPath)) });
  const user = await makeUser(t);
  const { key } = await makeApiKey(t, user.id);
  const zipUrl = `http://127.0.0.1:${server.server!.port}/api/models/big/download?quant=int4&sdk=v1.0`;

  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 10);
  const ratios: number[] = [];
  const growths: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const plain = await download(`http://127.0.0.1:${bare.port}/`);
    const before = process.memoryUsage.rss();
    peak = before;
    const zip = await download(zipUrl, `Bearer ${key}`);
    growths.push(peak - before);
    const mbps = (r: { bytes: number; seconds: number }) => r.bytes / 1e6 / r.seconds;
    ratios.push(mbps(zip) / mbps(plain));
    console.log(
      `round ${round + 1}: plain Bun.file ${mbps(plain).toFixed(0)} MB/s, ZIP stream ${mbps(zip).toFixed(0)} MB/s, ratio ${(mbps(zip) / mbps(plain)).toFixed(2)}, RSS +${(growths.at(-1)! / 2 ** 20).toFixed(1)} MB`,
    );
  }
  clearInterval(sampler);
  const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!;
  console.log(`ZIP ÷ plain file throughput (median of ${ROUNDS}): ${median.toFixed(2)} (target ≥ 0.80)`);
  // Round 1 also pays for first use (JIT, lazily built buffers); later rounds show the steady state.
  const mb = (n: number) => `${(n / 2 ** 20).toFixed(1)} MB`;
  console.log(`peak RSS growth while streaming ${SIZE_GIB} GiB: first ${mb(growths[0]!)}, later rounds max ${mb(Math.max(...growths.slice(1), 0))} (target ≤ 64 MB)`);
} finally {
  bare?.stop(true);
  await server.stop(true);
  await t.close();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);

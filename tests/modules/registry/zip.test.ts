import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { planZip, streamZip, type ZipEntry } from '../../../src/modules/registry/zip';

const GiB = 1024 ** 3;

/** The CRC-32 of `size` zero bytes, as a sparse file of that size holds (reading the file back costs seconds more). */
function crcOfZeros(size: number): number {
  const zeros = new Uint8Array(1 << 22);
  let crc = 0;
  for (let left = size; left > 0; left -= zeros.length) crc = Bun.hash.crc32(zeros.subarray(0, Math.min(left, zeros.length)), crc);
  return crc;
}

function readerFor(files: Record<string, string>) {
  return (key: string, start: number, end: number) => Bun.file(files[key]!).slice(start, end).stream();
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function unzip(args: string[]) {
  const r = Bun.spawnSync(['unzip', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, out: `${r.stdout.toString()}${r.stderr.toString()}` };
}

describe('zip writer', () => {
  let dir: string;
  const files: Record<string, string> = {};
  let entries: ZipEntry[];
  const content: Record<string, Uint8Array> = {};

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cpd-zip-'));
    const sources: Record<string, Uint8Array> = {
      'config.json': new TextEncoder().encode('{"format":"aria-quant-bundle","format_version":2}'),
      'weight.bin': crypto.getRandomValues(new Uint8Array(300_000)),
      'tokenizer/vocab.json': new TextEncoder().encode('{"héllo":1}'),
      'empty.txt': new Uint8Array(0),
    };
    entries = [];
    for (const [name, bytes] of Object.entries(sources)) {
      const path = join(dir, `src-${entries.length}`);
      writeFileSync(path, bytes);
      files[`k${entries.length}`] = path;
      content[name] = bytes;
      entries.push({ name, size: bytes.length, crc32: Bun.hash.crc32(bytes), key: `k${entries.length}` });
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('the archive passes unzip -t and extracts byte for byte', async () => {
    const plan = planZip(entries, new Date('2025-06-01T12:00:00Z'));
    const bytes = await collect(streamZip(plan, readerFor(files)));
    expect(bytes.length).toBe(plan.size);
    const zipPath = join(dir, 'out.zip');
    writeFileSync(zipPath, bytes);
    const tested = unzip(['-t', zipPath]);
    expect(tested.out).toContain('No errors detected');
    expect(tested.code).toBe(0);
    const out = join(dir, 'extracted');
    mkdirSync(out);
    expect(unzip(['-q', zipPath, '-d', out]).code).toBe(0);
    for (const [name, original] of Object.entries(content)) expect(Buffer.from(readFileSync(join(out, name))).equals(Buffer.from(original))).toBe(true);
  });

  test('ranges starting and ending inside headers, data and the central directory reassemble the archive', async () => {
    const plan = planZip(entries, new Date('2025-06-01T12:00:00Z'));
    const full = await collect(streamZip(plan, readerFor(files)));
    const cuts = new Set<number>();
    for (const s of plan.segments) for (const d of [0, 1, 7, Math.floor(s.length / 2), s.length - 1]) if (d < s.length) cuts.add(s.offset + d);
    const points = [...cuts, plan.size].sort((a, b) => a - b);
    const pieces: Uint8Array[] = [];
    for (let i = 0; i + 1 < points.length; i++) pieces.push(await collect(streamZip(plan, readerFor(files), points[i]!, points[i + 1]!)));
    expect(Buffer.concat(pieces).equals(Buffer.from(full))).toBe(true);
    // A resumed download: everything after an arbitrary point inside the central directory.
    const cd = plan.segments.at(-1)!;
    const tail = await collect(streamZip(plan, readerFor(files), cd.offset + 3));
    expect(Buffer.from(tail).equals(Buffer.from(full.subarray(cd.offset + 3)))).toBe(true);
  });

  test('a bundle over 4 GiB of sparse files is a valid ZIP64 archive', async () => {
    const big = join(dir, 'big.bin');
    // Just over 4 GiB: a size and an offset past 32 bits need the ZIP64 fields, and each byte
    // more is a byte `unzip -t` reads and checks (its CRC-32 takes most of this test's time).
    const bigSize = 4 * GiB + 12345;
    closeSync(openSync(big, 'w'));
    const fd0 = openSync(big, 'r+');
    ftruncateSync(fd0, bigSize); // a sparse file of zeros
    closeSync(fd0);
    const small = join(dir, 'after.json');
    writeFileSync(small, '{"after":"the 4 GiB mark"}');
    const bigFiles = { big, small };
    const bigEntries: ZipEntry[] = [
      { name: 'weight.bin', size: bigSize, crc32: crcOfZeros(bigSize), key: 'big' },
      { name: 'config.json', size: Bun.file(small).size, crc32: Bun.hash.crc32(readFileSync(small)), key: 'small' },
    ];
    const plan = planZip(bigEntries, new Date());
    expect(plan.size).toBeGreaterThan(bigSize);

    // Stream the archive into a file, seeking over all-zero chunks so the file stays sparse.
    const zipPath = join(dir, 'big.zip');
    const fd = openSync(zipPath, 'w');
    const zeros = Buffer.alloc(1 << 22);
    const isZero = (c: Uint8Array) => c.length <= zeros.length && Buffer.from(c.buffer, c.byteOffset, c.length).equals(zeros.subarray(0, c.length));
    let at = 0;
    try {
      for await (const chunk of streamZip(plan, readerFor(bigFiles))) {
        if (!isZero(chunk)) writeSync(fd, chunk, 0, chunk.length, at);
        at += chunk.length;
      }
      ftruncateSync(fd, at);
    } finally {
      closeSync(fd);
    }
    expect(at).toBe(plan.size);
    const tested = unzip(['-t', zipPath]);
    rmSync(zipPath);
    rmSync(big);
    expect(tested.out).toContain('No errors detected');
    expect(tested.code).toBe(0);
  }, 240_000);
});

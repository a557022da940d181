import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { planZip, streamZip, type ZipEntry } from '../../../src/modules/registry/zip';
import { collect, readerFor, unzip } from './zip.support';

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
    for (const [name, original] of Object.entries(content))
      expect(Buffer.from(readFileSync(join(out, name))).equals(Buffer.from(original))).toBe(true);
  });

  test('ranges starting and ending inside headers, data and the central directory reassemble the archive', async () => {
    const plan = planZip(entries, new Date('2025-06-01T12:00:00Z'));
    const full = await collect(streamZip(plan, readerFor(files)));
    const cuts = new Set<number>();
    for (const s of plan.segments)
      for (const d of [0, 1, 7, Math.floor(s.length / 2), s.length - 1]) if (d < s.length) cuts.add(s.offset + d);
    const points = [...cuts, plan.size].sort((a, b) => a - b);
    const pieces: Uint8Array[] = [];
    for (let i = 0; i + 1 < points.length; i++) pieces.push(await collect(streamZip(plan, readerFor(files), points[i]!, points[i + 1]!)));
    expect(Buffer.concat(pieces).equals(Buffer.from(full))).toBe(true);
    // A resumed download: everything after an arbitrary point inside the central directory.
    const cd = plan.segments.at(-1)!;
    const tail = await collect(streamZip(plan, readerFor(files), cd.offset + 3));
    expect(Buffer.from(tail).equals(Buffer.from(full.subarray(cd.offset + 3)))).toBe(true);
  });
});

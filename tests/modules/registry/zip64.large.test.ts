/**
 * The ZIP writer past 4 GiB (ZIP64), streamed from a sparse file and checked with `unzip -t`: about
 * half a minute of CPU, so `make test-fast` leaves it (and every *.large.test.ts) to `make test`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { closeSync, ftruncateSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { planZip, streamZip, type ZipEntry } from '../../../src/modules/registry/zip';
import { crcOfZeros, GiB, readerFor, unzip } from './zip.support';

describe('zip writer past 4 GiB', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cpd-zip64-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

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
    const isZero = (c: Uint8Array) =>
      c.length <= zeros.length && Buffer.from(c.buffer, c.byteOffset, c.length).equals(zeros.subarray(0, c.length));
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

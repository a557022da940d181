/**
 * Preloaded into a `bun src/main.ts serve` by bench/soak.ts (SOAK_HEAP=1): on SIGUSR2 it runs a
 * full garbage collection and writes the live JavaScript heap (size, objects, counts by type) as
 * JSON to HEAP_PROBE_DIR/heap-<n>.json. Compared between the end of warm-up and the end, it tells a
 * leak (live objects piling up) from the allocator's memory that RSS also counts.
 */
import { heapStats } from 'bun:jsc';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.HEAP_PROBE_DIR;
let taken = 0;
if (dir)
  process.on('SIGUSR2', () => {
    Bun.gc(true);
    const s = heapStats();
    const file = join(dir, `heap-${taken++}.json`);
    // Written whole, then renamed: the soak reads the file as soon as it exists.
    writeFileSync(`${file}.part`, JSON.stringify({ heapSize: s.heapSize, objectCount: s.objectCount, counts: s.objectTypeCounts }));
    renameSync(`${file}.part`, file);
  });

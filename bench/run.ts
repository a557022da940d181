/**
 * `make bench`: runs every bench/*.ts except this one and the soak (ten minutes: `make soak`), one
 * after another (benchmarks must not compete for the CPU), and exits non-zero if any of them failed.
 */
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';

const dir = import.meta.dir;
const skipped = new Set([basename(import.meta.path), 'soak.ts']);
const benches = readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && !skipped.has(f))
  .sort();

const failed: string[] = [];
for (const file of benches) {
  console.log(`\n== bench/${file}`);
  const proc = Bun.spawn([process.execPath, join(dir, file)], { stdout: 'inherit', stderr: 'inherit', cwd: join(dir, '..') });
  if ((await proc.exited) !== 0) failed.push(file);
}
if (failed.length) {
  console.error(`\nfailed: ${failed.join(', ')}`);
  process.exit(1);
}

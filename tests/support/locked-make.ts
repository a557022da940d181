/**
 * `make` for test processes, one at a time: test files run in parallel workers (`make test`), and
 * each brings the console bundle or dist/cpd up to date before using it. Under flock(1) the first
 * one builds and the others, waiting, then find the files fresh, instead of writing them side by side.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dir, '../..');
const LOCK_FILE = join(ROOT, 'node_modules/.cache/cpd/make.lock');

/** The command line running `make ...args` under the lock, with this bun. */
export function lockedMake(...args: string[]): string[] {
  mkdirSync(dirname(LOCK_FILE), { recursive: true });
  return ['flock', LOCK_FILE, 'make', '--no-print-directory', ...args, `BUN=${process.execPath}`];
}

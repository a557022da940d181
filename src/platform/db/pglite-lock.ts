/**
 * One process at a time on an embedded database. PGlite has no postmaster to keep a second
 * process out, and two processes writing DATA_DIR/pg (say `cpd users create` beside a running
 * `cpd serve`) would corrupt it. An flock(2) on DATA_DIR/pg.lock is released by the kernel when
 * the holder exits, however it exits, so a crash never leaves a stale lock behind.
 * Node and Bun have no flock, hence the libc call through bun:ffi.
 */
import { dlopen, FFIType } from 'bun:ffi';
import { closeSync, openSync } from 'node:fs';
import { FatalError } from '../errors';

const LOCK_EX = 2;
const LOCK_NB = 4;

function loadFlock(): ((fd: number, op: number) => number) | null {
  for (const name of ['libc.so.6', 'libc.dylib', 'libc.so']) {
    try {
      const lib = dlopen(name, { flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } });
      return (fd, op) => lib.symbols.flock(fd, op);
    } catch {}
  }
  return null; // an unusual libc: run unlocked rather than not at all
}

let flock: ReturnType<typeof loadFlock> | undefined;

/** Takes the lock or throws at once; the returned function releases it. */
export function lockEmbeddedDatabase(dataDir: string): () => void {
  flock ??= loadFlock();
  const path = `${dataDir}.lock`;
  const fd = openSync(path, 'a');
  if (flock && flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    closeSync(fd);
    throw new FatalError(
      `the embedded database ${dataDir} is in use by another cpd process (a running \`cpd serve\`?): stop it first (systemctl stop cpd@SITE), or use DATABASE_URL to share a database`,
      2,
    );
  }
  return () => closeSync(fd);
}

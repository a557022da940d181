/**
 * flock(2) through bun:ffi (Node and Bun have none: docs/decisions/0004-flock-through-ffi.md). The
 * kernel releases the lock when the file description closes, however the process ends, so a crash
 * never leaves a stale lock behind.
 */
import { dlopen, FFIType } from 'bun:ffi';

const LOCK_EX = 2;
const LOCK_NB = 4;

function loadFlock(): ((fd: number, op: number) => number) | null {
  for (const name of ['libc.so.6', 'libc.dylib', 'libc.so']) {
    try {
      const lib = dlopen(name, { flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } });
      return (fd, op) => lib.symbols.flock(fd, op);
    } catch {}
  }
  return null;
}

let flock: ReturnType<typeof loadFlock> | undefined;

/** Whether flock(2) could be loaded (an unusual libc may not have it). */
export function canLock(): boolean {
  flock ??= loadFlock();
  return flock !== null;
}

/** Takes an exclusive lock on `fd` without waiting: false when another open file holds it (or there is no flock). */
export function tryLockExclusive(fd: number): boolean {
  flock ??= loadFlock();
  return flock !== null && flock(fd, LOCK_EX | LOCK_NB) === 0;
}

/**
 * One process at a time on an embedded database. PGlite has no postmaster to keep a second
 * process out, and two processes writing DATA_DIR/pg (say `cpd users create` beside a running
 * `cpd serve`) would corrupt it. An flock(2) on DATA_DIR/pg.lock is released by the kernel when
 * the holder exits, however it exits, so a crash never leaves a stale lock behind.
 */
import { closeSync, openSync } from 'node:fs';
import { FatalError } from '../errors';
import { canLock, tryLockExclusive } from '../flock';

/** Takes the lock or throws at once; the returned function releases it. */
export function lockEmbeddedDatabase(dataDir: string): () => void {
  const path = `${dataDir}.lock`;
  const fd = openSync(path, 'a');
  // An unusual libc without flock: run unlocked rather than not at all.
  if (canLock() && !tryLockExclusive(fd)) {
    closeSync(fd);
    throw new FatalError(
      `the embedded database ${dataDir} is in use by another cpd process (a running \`cpd serve\`?): stop it first (systemctl stop cpd@SITE), or use DATABASE_URL to share a database`,
      2,
    );
  }
  return () => closeSync(fd);
}

/**
 * Test preload (bunfig.toml): the server imports the console's browser bundle, a generated module
 * that `make` writes and git ignores. Bring it up to date before any test imports the app, so
 * `bun test` works in a fresh clone as `make test` does. A no-op when it is fresh.
 */
import { lockedMake, ROOT } from './locked-make';

const made = Bun.spawnSync(lockedMake('-s', 'console'), { cwd: ROOT });
if (made.exitCode !== 0) throw new Error(`make console failed:\n${made.stdout.toString()}${made.stderr.toString()}`);

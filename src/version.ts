import pkg from '../package.json' with { type: 'json' };

// Set by the build (`bun build --define`, see the Makefile and scripts/release.ts); a run from
// source has neither, so it reports its own platform and no commit.
declare const CPD_BUILD_COMMIT: string | undefined;
declare const CPD_BUILD_TARGET: string | undefined;

export const VERSION: string = pkg.version;
export const BUILD_COMMIT: string = typeof CPD_BUILD_COMMIT === 'string' ? CPD_BUILD_COMMIT : 'unknown';
export const BUILD_TARGET: string = typeof CPD_BUILD_TARGET === 'string' ? CPD_BUILD_TARGET : `${process.platform}-${process.arch}`;

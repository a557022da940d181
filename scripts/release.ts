#!/usr/bin/env bun
/**
 * `make release`: one cpd executable per supported host in dist/release/, plus SHA256SUMS.
 *
 *   bun scripts/release.ts [target…]      # default: every target below
 *
 * Bun cross-compiles (`compile.target` fetches that platform's Bun runtime from the npm registry).
 * The one native addon, @node-rs/argon2, ships one npm package per platform and only the host's is
 * installed, so each target's package is fetched with `npm pack` at the version bun.lock pins,
 * checked against bun.lock's integrity hash, and the bundler is pointed at it: every binary embeds
 * exactly its own platform's addon (the other platforms' requires become a throwing stub).
 * The build options are the Makefile's `dist/cpd` flags (see the reasons there); keep them in step.
 */
import type { BunPlugin } from 'bun';
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pkg from '../package.json' with { type: 'json' };

const ROOT = resolve(import.meta.dir, '..');
const OUT_DIR = join(ROOT, 'dist/release');
const STAGING = join(OUT_DIR, '.addons');

interface Target {
  /** Our name for it: the file is cpd-<name>. */
  name: string;
  /** Bun's compile target. */
  bun: Bun.Build.CompileTarget;
  /** The @node-rs/argon2 platform package suffix. */
  addon: string;
}

export const TARGETS: Target[] = [
  { name: 'linux-x64', bun: 'bun-linux-x64', addon: 'linux-x64-gnu' },
  { name: 'linux-arm64', bun: 'bun-linux-arm64', addon: 'linux-arm64-gnu' },
  { name: 'linux-x64-musl', bun: 'bun-linux-x64-musl', addon: 'linux-x64-musl' },
  { name: 'linux-arm64-musl', bun: 'bun-linux-arm64-musl', addon: 'linux-arm64-musl' },
  { name: 'darwin-arm64', bun: 'bun-darwin-arm64', addon: 'darwin-arm64' },
];

async function run(cmd: string[], cwd = ROOT): Promise<string> {
  const proc = Bun.spawn(cmd, { cwd, stdout: 'pipe', stderr: 'pipe' });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${cmd.join(' ')} failed (${code}):\n${out}${err}`);
  return out.trim();
}

/** The version and integrity bun.lock pins for a package. */
async function lockedPackage(name: string): Promise<{ version: string; integrity: string }> {
  const lock = await Bun.file(join(ROOT, 'bun.lock')).text();
  const line = lock.split('\n').find((l) => l.trimStart().startsWith(`"${name}": ["${name}@`));
  const match = line?.match(/"[^"]+@([^"]+)",.*"(sha512-[^"]+)"\]/);
  if (!match) throw new Error(`${name} is not in bun.lock`);
  return { version: match[1]!, integrity: match[2]! };
}

/** Downloads and unpacks the target's addon package; returns the directory holding its package.json. */
async function stageAddon(target: Target): Promise<string> {
  const name = `@node-rs/argon2-${target.addon}`;
  const { version, integrity } = await lockedPackage(name);
  const dir = join(STAGING, target.addon);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const [packed] = JSON.parse(await run(['npm', 'pack', `${name}@${version}`, '--pack-destination', dir, '--json', '--silent'])) as {
    filename: string;
    integrity: string;
  }[];
  if (packed?.integrity !== integrity) throw new Error(`${name}@${version}: integrity ${packed?.integrity} is not bun.lock's ${integrity}`);
  await run(['tar', '-xzf', packed.filename], dir);
  return join(dir, 'package');
}

/** Resolves `@node-rs/argon2-<platform>` to the staged package of this target, every other platform to a stub. */
function addonPlugin(target: Target, packageDir: string): BunPlugin {
  return {
    name: 'argon2-addon-of-target',
    setup(build) {
      build.onResolve({ filter: /^@node-rs\/argon2-[a-z0-9-]+(\/package\.json)?$/ }, (args) => {
        const [pkgName, file] = args.path.split(/\/(?=package\.json$)/);
        if (pkgName !== `@node-rs/argon2-${target.addon}`) return { path: args.path, namespace: 'other-platform-addon' };
        return { path: join(packageDir, file ?? `argon2.${target.addon}.node`) };
      });
      build.onLoad({ filter: /.*/, namespace: 'other-platform-addon' }, (args) => ({
        contents: `throw new Error(${JSON.stringify(`${args.path} is not part of the ${target.name} build`)});`,
        loader: 'js',
      }));
    },
  };
}

async function buildTarget(target: Target, commit: string): Promise<string> {
  const packageDir = await stageAddon(target);
  const outfile = join(OUT_DIR, `cpd-${target.name}`);
  const result = await Bun.build({
    // The token counter's worker thread is a second entry point (as in the Makefile's WORKERS).
    entrypoints: [join(ROOT, 'src/main.ts'), join(ROOT, 'src/modules/metering/metering.tokens.worker.ts')],
    compile: { target: target.bun, outfile },
    bytecode: true,
    splitting: true,
    format: 'esm',
    minify: { whitespace: true, syntax: true, identifiers: false },
    sourcemap: 'none',
    define: { CPD_BUILD_COMMIT: JSON.stringify(commit), CPD_BUILD_TARGET: JSON.stringify(target.name) },
    plugins: [addonPlugin(target, packageDir)],
    throw: false,
  });
  if (!result.success) throw new Error(`${target.name}: ${result.logs.map(String).join('\n')}`);
  return outfile;
}

async function main(names: string[]) {
  const unknown = names.filter((n) => !TARGETS.some((t) => t.name === n));
  if (unknown.length) throw new Error(`unknown target(s) ${unknown.join(', ')}; known: ${TARGETS.map((t) => t.name).join(', ')}`);
  const targets = names.length ? TARGETS.filter((t) => names.includes(t.name)) : TARGETS;
  const commit = await run(['git', 'rev-parse', '--short=12', 'HEAD']);
  mkdirSync(OUT_DIR, { recursive: true });
  for (const target of targets) {
    const started = performance.now();
    await buildTarget(target, commit);
    console.log(`cpd-${target.name}  (${pkg.version}, ${commit}) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  rmSync(STAGING, { recursive: true, force: true });
  const files = (await run(['ls'], OUT_DIR)).split('\n').filter((f) => f.startsWith('cpd-'));
  await Bun.write(join(OUT_DIR, 'SHA256SUMS'), `${await run(['sha256sum', ...files], OUT_DIR)}\n`);
  console.log(`dist/release/SHA256SUMS: ${files.length} files`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(`release: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  });
}

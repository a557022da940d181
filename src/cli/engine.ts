import cliProgress from 'cli-progress';
import pino from 'pino';
import { loadConfig } from '../config';
import { createReleasesService } from '../modules/releases';
import { type InstallProgress, installRuntime, readRuntimeState, rollbackRuntime, type RuntimeComponent } from '../modules/runtime';
import { systemClock } from '../platform/clock';
import type { AppContext } from '../app-context';
import { AppError } from '../platform/errors';
import { createLogger } from '../platform/logger';
import { FatalError, parseCommand, UsageError } from './args';

const HELP = `
Usage:
  cpd engine install [--component engine|router] [--tag T] [--allow-unverified] [--rollback]
  cpd engine status [--json]

install  downloads the release (latest, or --tag) of the engine (default) or router for this OS
         through the site's release source, checks size and SHA-256, unpacks it into
         DATA_DIR/runtimes/<component>/<tag>/ and makes it current. A release that publishes no
         digest is refused unless --allow-unverified. --rollback switches back to the version
         that was current before.
status   shows the processes \`cpd serve\` supervises (from DATA_DIR/runtimes/state.json):
         pid, port, model, state, restarts, last exit and last error.
`;

/** A bar per asset on a TTY; otherwise one line per asset at every 25% and per step. */
function progressReporter(): { onProgress: (p: InstallProgress) => void; stop(): void } {
  const bar = process.stderr.isTTY
    ? new cliProgress.SingleBar({ format: '{asset} [{bar}] {percentage}% | {value}/{total} KB', stream: process.stderr, hideCursor: true }, cliProgress.Presets.shades_classic)
    : null;
  let current: string | null = null;
  let lastQuarter = -1;
  const kb = (n: number) => Math.ceil(n / 1024);
  return {
    onProgress(p) {
      if (p.phase !== 'download') {
        if (bar && current) bar.stop();
        current = null;
        process.stderr.write(p.phase === 'switched' ? `current is now ${p.tag}\n` : `${p.phase}: ${p.asset}\n`);
        return;
      }
      if (p.asset !== current) {
        current = p.asset;
        lastQuarter = -1;
        bar?.start(kb(p.totalBytes), 0, { asset: p.asset });
      }
      if (bar) return bar.update(kb(p.doneBytes), { asset: p.asset });
      const quarter = p.totalBytes ? Math.floor((p.doneBytes / p.totalBytes) * 4) : 4;
      if (quarter > lastQuarter) process.stderr.write(`download ${p.asset}: ${quarter * 25}% (${p.doneBytes}/${p.totalBytes} bytes)\n`);
      lastQuarter = quarter;
    },
    stop: () => bar?.stop(),
  };
}

async function install(argv: string[]) {
  const { values } = parseCommand(argv, { component: { type: 'string' }, tag: { type: 'string' }, rollback: { type: 'boolean' }, 'allow-unverified': { type: 'boolean' } }, HELP);
  const component = (values.component ?? 'engine') as RuntimeComponent;
  if (component !== 'engine' && component !== 'router') throw new UsageError(`--component must be engine or router\n${HELP}`);
  const config = loadConfig();
  if (values.rollback) {
    if (values.tag) throw new UsageError('--rollback takes no --tag');
    const { current, previous } = rollbackRuntime(config.dataDir, component);
    console.log(JSON.stringify({ component, current, previous }));
    return;
  }
  // The releases service reads only config, clock and log: no database is opened for an install.
  const ctx = { config, clock: systemClock, log: createLogger('warn', pino.destination({ fd: 2, sync: true })), onShutdown: () => {} } as unknown as AppContext;
  const progress = progressReporter();
  try {
    const result = await installRuntime(config, createReleasesService(ctx), { component, tag: values.tag, onProgress: progress.onProgress, allowUnverified: values['allow-unverified'] ?? false });
    progress.stop();
    console.log(JSON.stringify(result));
  } finally {
    progress.stop();
  }
}

function status(argv: string[]) {
  const { values } = parseCommand(argv, { json: { type: 'boolean' } }, HELP);
  const state = readRuntimeState(loadConfig().dataDir);
  if (!state) {
    console.log('no supervised runtimes: `cpd serve` has not run with ENGINES here');
    return;
  }
  if (values.json) return console.log(JSON.stringify(state, null, 2));
  console.log(
    state.server_running
      ? `cpd serve (pid ${state.server_pid}), state at ${state.updated_at}`
      : `cpd serve is not running (pid ${state.server_pid} is gone); last state at ${state.updated_at}`,
  );
  const rows = state.processes.map((p) => [
    p.name,
    p.model,
    p.state,
    String(p.pid ?? '-'),
    String(p.port ?? '-'),
    String(p.restarts),
    p.last_exit ? (p.last_exit.signal ?? `code ${p.last_exit.code}`) : '-',
    p.last_error ?? '-',
  ]);
  const table = [['NAME', 'MODEL', 'STATE', 'PID', 'PORT', 'RESTARTS', 'LAST EXIT', 'LAST ERROR'], ...rows];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  for (const row of table) console.log(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '));
}

export async function engineCommand(argv: string[]) {
  const [sub, ...rest] = argv;
  try {
    if (sub === 'install') return await install(rest);
    if (sub === 'status') return status(rest);
  } catch (err) {
    if (err instanceof AppError) throw new FatalError(`engine ${sub}: ${err.message}`);
    throw err;
  }
  if (sub === '--help' || sub === '-h' || sub === undefined) {
    process.stdout.write(`${HELP.trim()}\n`);
    if (sub === undefined) process.exitCode = 2;
    return;
  }
  throw new UsageError(`unknown engine subcommand "${sub}"\n${HELP}`);
}

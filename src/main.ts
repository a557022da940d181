#!/usr/bin/env bun
/**
 * cpd: one executable per site. Dispatches argv to the cli/ commands.
 * Commands are imported on demand: `cpd version` or `--help` does not load the whole server, and
 * `cpd serve` on the embedded database starts compiling PGlite's WebAssembly (on JSC's compiler
 * threads) while the server's modules are still loading.
 */
import { FatalError, UsageError } from './cli/args';
import { applyEnvFile } from './cli/env-file';
import { ConfigError } from './config';
import { pgliteAssets } from './platform/db/pglite-assets';
import { safeError, safeErrorText } from './platform/safe-error';

const HELP = `
Usage: cpd <command> [options]

Commands:
  serve            start the server for one site
  migrate          apply database migrations and exit
  users            create|list|disable|enable|promote|demote|password: accounts
  wallet adjust    record a signed wallet adjustment with a reason
  payments refund  refund a paid payment through its provider, debiting the wallet
  models publish   publish a model file or bundle directory
  engine           install|status: engine and router runtimes
  version          print the version

Run \`cpd <command> --help\` for a command's options. Configuration comes from the environment;
every command takes \`--env-file FILE\` (KEY=VALUE lines, e.g. /etc/cpd/intl.env), whose values
win over the shell's.
`;

type Command = (argv: string[]) => Promise<void> | void;
const commands: Record<string, () => Promise<Command>> = {
  serve: async () => (await import('./cli/serve')).serveCommand,
  migrate: async () => (await import('./cli/migrate')).migrateCommand,
  users: async () => (await import('./cli/users')).usersCommand,
  wallet: async () => (await import('./cli/wallet')).walletCommand,
  payments: async () => (await import('./cli/payments')).paymentsCommand,
  models: async () => (await import('./cli/models')).modelsCommand,
  engine: async () => (await import('./cli/engine')).engineCommand,
  version: async () => (await import('./cli/version')).versionCommand,
};

async function main(argv: string[]) {
  // Everything cpd writes (the embedded database with password hashes and TOTP secrets, the
  // secret key, objects, runtimes, logs) is for this account only, whatever umask it was started
  // with: files 0600, folders 0700.
  process.umask(0o077);
  const [name, ...rest] = applyEnvFile(argv);
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${HELP.trim()}\n`);
    if (!name) process.exitCode = 2;
    return;
  }
  const load = commands[name === '--version' ? 'version' : name];
  if (!load) throw new UsageError(`unknown command "${name}"\n${HELP}`);
  if (name === 'serve' && !process.env.DATABASE_URL) void pgliteAssets();
  await (await load())(rest);
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`cpd: invalid configuration: ${err.message}\n`);
    process.exit(2);
  }
  if (err instanceof UsageError) {
    process.stderr.write(`cpd: ${err.message.trim()}\n`);
    process.exit(2);
  }
  if (err instanceof FatalError) {
    process.stderr.write(`cpd: ${err.message}\n`);
    process.exit(err.exitCode);
  }
  // A bug: its stack, never a failed query's values.
  const frames = safeError(err).stack?.split('\n').slice(1) ?? [];
  process.stderr.write(`cpd: ${[safeErrorText(err), ...frames].join('\n')}\n`);
  process.exit(1);
});

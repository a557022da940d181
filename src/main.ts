#!/usr/bin/env bun
/** cpd: one executable per site. Dispatches argv to the cli/ commands. */
import { ConfigError } from './config';
import { engineCommand } from './cli/engine';
import { FatalError, UsageError } from './cli/args';
import { migrateCommand } from './cli/migrate';
import { modelsCommand } from './cli/models';
import { serveCommand } from './cli/serve';
import { usersCommand } from './cli/users';
import { versionCommand } from './cli/version';

const HELP = `
Usage: cpd <command> [options]

Commands:
  serve            start the server for one site
  migrate          apply database migrations and exit
  users create     create an account
  models publish   publish a model file or bundle directory
  engine           install|status: engine and router runtimes
  version          print the version

Run \`cpd <command> --help\` for a command's options. Configuration comes from the environment.
`;

const commands: Record<string, (argv: string[]) => Promise<void> | void> = {
  serve: serveCommand,
  migrate: migrateCommand,
  users: usersCommand,
  models: modelsCommand,
  engine: engineCommand,
  version: versionCommand,
};

async function main(argv: string[]) {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${HELP.trim()}\n`);
    if (!name) process.exitCode = 2;
    return;
  }
  if (name === '--version') return versionCommand([]);
  const command = commands[name];
  if (!command) throw new UsageError(`unknown command "${name}"\n${HELP}`);
  await command(rest);
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
    process.exit(1);
  }
  process.stderr.write(`cpd: ${(err as Error)?.stack ?? err}\n`);
  process.exit(1);
});

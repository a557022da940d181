/**
 * `--env-file FILE`, taken by every command: the same file the systemd unit reads
 * (EnvironmentFile=), so `cpd users create --env-file /etc/cpd/intl.env` reaches the served
 * site's database. Its values win over the shell's, as EnvironmentFile= wins over Environment=.
 */
import { readFileSync } from 'node:fs';
import { parseEnv } from 'node:util';
import { UsageError } from './args';

/** Removes `--env-file FILE` / `--env-file=FILE` from argv and loads FILE into process.env. */
export function applyEnvFile(argv: string[]): string[] {
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--env-file' || arg.startsWith('--env-file=')) {
      const file = arg === '--env-file' ? argv[++i] : arg.slice('--env-file='.length);
      if (!file) throw new UsageError('--env-file needs a file name');
      loadEnvFile(file);
    } else rest.push(arg);
  }
  return rest;
}

function loadEnvFile(file: string): void {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --env-file ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  Object.assign(process.env, parseEnv(text));
}

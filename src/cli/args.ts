import { parseArgs, type ParseArgsConfig } from 'node:util';

export class UsageError extends Error {}

/** node:util parseArgs with `--help` handled and unknown flags reported as usage errors. */
export function parseCommand<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T, help: string) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n\n${help}`);
  }
  if (parsed.values.help) {
    process.stdout.write(`${help.trim()}\n`);
    process.exit(0);
  }
  return parsed as { values: { [K in keyof T]?: T[K]['type'] extends 'boolean' ? boolean : string }; positionals: string[] };
}

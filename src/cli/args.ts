import { type ParseArgsConfig, parseArgs } from 'node:util';

export class UsageError extends Error {}

export { FatalError } from '../platform/errors';

type Options = NonNullable<ParseArgsConfig['options']>;
export type ParsedCommand<T extends Options> = {
  values: { [K in keyof T]?: T[K]['type'] extends 'boolean' ? boolean : string };
  positionals: string[];
};

/**
 * node:util parseArgs with `--help`/`-h` printing `help` and exiting 0, and unknown flags reported
 * as a UsageError (exit 2 with the usage text).
 */
export function parseCommand<T extends Options>(argv: string[], options: T, help: string): ParsedCommand<T> {
  const config = { args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true } as const;
  let parsed: ReturnType<typeof parseArgs<typeof config>>;
  try {
    parsed = parseArgs(config);
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n\n${help.trim()}`);
  }
  if ((parsed.values as { help?: boolean }).help) {
    process.stdout.write(`${help.trim()}\n`);
    process.exit(0);
  }
  return parsed as unknown as ParsedCommand<T>;
}

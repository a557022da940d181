import cliProgress from 'cli-progress';
import { loadConfig } from '../config';
import { type PublishInput, type PublishProgress, publishArtifact, validatePublishInput } from '../modules/registry';
import { AppError } from '../platform/errors';
import { openObjectStore } from '../platform/storage';
import { FatalError, parseCommand, UsageError } from './args';
import { migrateForCommand, openForCommand, requireExistingSchema } from './database';

const HELP = `
Usage: cpd models publish PATH --slug S --quant Q --sdk vX.Y [--name N] [--family F] [--description D]

Publishes a model artifact into this site's registry (same environment as \`cpd serve\`,
e.g. --env-file /etc/cpd/SITE.env). The site's database must exist: \`cpd serve\` or
\`cpd migrate\` creates it; publish never does.
PATH is a file (downloads answer 302 to it) or a bundle directory (downloads answer a ZIP).
Size, CRC-32 and SHA-256 of every file are computed once, here. Republishing the same
(slug, quant, sdk) replaces the artifact atomically: the old one is served until the new one is
complete. --quant is int4, int8 or int326; --sdk looks like v1.0. Prints the artifact as JSON.
`;

/** A bar on a TTY; otherwise one line per phase and every 10%, so logs stay readable. */
function progressReporter(): { onProgress: PublishProgress; stop(): void } {
  if (process.stderr.isTTY) {
    const bar = new cliProgress.SingleBar(
      { format: '{phase} [{bar}] {percentage}% | {value}/{total} MB', stream: process.stderr, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let current: string | null = null;
    const mb = (n: number) => Math.round(n / 1e6);
    return {
      onProgress(phase, done, total) {
        if (phase !== current) {
          if (current) bar.stop();
          current = phase;
          bar.start(mb(total), 0, { phase: phase.padEnd(7) });
        }
        bar.update(mb(done), { phase: phase.padEnd(7) });
      },
      stop: () => bar.stop(),
    };
  }
  const reported = new Map<string, number>();
  return {
    onProgress(phase, done, total) {
      const tenth = total === 0 ? 10 : Math.floor((done / total) * 10);
      if ((reported.get(phase) ?? -1) >= tenth) return;
      reported.set(phase, tenth);
      process.stderr.write(`${phase}: ${tenth * 10}% (${done}/${total} bytes)\n`);
    },
    stop() {},
  };
}

export async function modelsCommand(argv: string[]) {
  const [sub, ...rest] = argv;
  if (sub !== 'publish') {
    if (sub === undefined || sub === '--help' || sub === '-h') {
      process.stdout.write(`${HELP.trim()}\n`);
      if (sub === undefined) process.exitCode = 2;
      return;
    }
    throw new UsageError(`unknown models subcommand "${sub}"\n${HELP}`);
  }
  const { values, positionals } = parseCommand(
    rest,
    { slug: { type: 'string' }, quant: { type: 'string' }, sdk: { type: 'string' }, name: { type: 'string' }, family: { type: 'string' }, description: { type: 'string' } },
    HELP,
  );
  if (positionals.length !== 1) throw new UsageError(`exactly one PATH is required\n${HELP}`);
  if (!values.slug || !values.quant || !values.sdk) throw new UsageError(`--slug, --quant and --sdk are required\n${HELP}`);

  const input: PublishInput = { path: positionals[0]!, slug: values.slug, quant: values.quant, sdk: values.sdk, name: values.name, family: values.family, description: values.description };
  try {
    validatePublishInput(input);
  } catch (err) {
    if (err instanceof AppError) throw new FatalError(`models publish: ${err.message}`);
    throw err;
  }
  // Publishing fills a served site's registry: it never creates a database (`cpd migrate` does).
  const ctx = await openForCommand(loadConfig(), { existing: true });
  const progress = progressReporter();
  try {
    await requireExistingSchema(ctx);
    await migrateForCommand(ctx);
    const store = openObjectStore(ctx.config, ctx.clock);
    const result = await publishArtifact(ctx, store, input, progress.onProgress);
    progress.stop();
    console.log(JSON.stringify(result));
  } catch (err) {
    progress.stop();
    if (err instanceof AppError) throw new FatalError(`models publish: ${err.message}`);
    throw err;
  } finally {
    await ctx.shutdown();
  }
}

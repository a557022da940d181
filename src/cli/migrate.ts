import { loadConfig } from '../config';
import { parseCommand } from './args';
import { migrateForCommand, openForCommand } from './database';

const HELP = `
Usage: cpd migrate

Applies the pending database migrations embedded in this binary, then exits. Runs under a
PostgreSQL advisory lock, so it is safe while replicas start or other \`cpd migrate\` run.
Uses DATABASE_URL, or the embedded database in DATA_DIR/pg when it is unset.
`;

export async function migrateCommand(argv: string[]) {
  parseCommand(argv, {}, HELP);
  const ctx = await openForCommand(loadConfig());
  try {
    const applied = await migrateForCommand(ctx);
    console.log(applied.length ? `applied ${applied.length} migration(s): ${applied.join(', ')}` : 'database is up to date');
  } finally {
    await ctx.shutdown();
  }
}

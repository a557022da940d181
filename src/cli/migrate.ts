import { loadConfig } from '../config';
import { createContext } from '../platform/context-factory';
import { migrate } from '../platform/db';
import { parseCommand } from './args';

const HELP = `
Usage: cpd migrate

Applies pending database migrations (embedded in the binary) under an advisory lock, then exits.
Safe to run while other replicas start.
`;

export async function migrateCommand(argv: string[]) {
  parseCommand(argv, {}, HELP);
  const ctx = await createContext(loadConfig());
  try {
    const applied = await migrate(ctx.database);
    console.log(applied.length ? `applied ${applied.length} migration(s): ${applied.join(', ')}` : 'database is up to date');
  } finally {
    await ctx.shutdown();
  }
}

import { ConfigError, loadConfig } from '../config';
import { createContext } from '../platform/context-factory';
import { migrate } from '../platform/db';
import { rootMessage } from '../platform/errors';
import { FatalError, parseCommand } from './args';

const HELP = `
Usage: cpd migrate

Applies the pending database migrations embedded in this binary, then exits. Runs under a
PostgreSQL advisory lock, so it is safe while replicas start or other \`cpd migrate\` run.
Uses DATABASE_URL, or the embedded database in DATA_DIR/pg when it is unset.
`;

export async function migrateCommand(argv: string[]) {
  parseCommand(argv, {}, HELP);
  const ctx = await createContext(loadConfig());
  try {
    const applied = await migrate(ctx.database, { site: ctx.config.site }).catch((err) => {
      if (err instanceof ConfigError) throw err;
      throw new FatalError(`migrations failed: ${rootMessage(err)}`);
    });
    console.log(applied.length ? `applied ${applied.length} migration(s): ${applied.join(', ')}` : 'database is up to date');
  } finally {
    await ctx.shutdown();
  }
}

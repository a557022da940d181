/**
 * Opening and migrating the site's database for a command, with the refusals an operator can act
 * on as one line and exit 2 (unreachable, in use, not where it was expected).
 */
import { sql } from 'drizzle-orm';
import { type Config, ConfigError } from '../config';
import { createContext, type OpenOptions } from '../context-factory';
import { isDatabaseUnreachable, migrate } from '../platform/db';
import { FatalError, rootMessage } from '../platform/errors';

export type CommandContext = Awaited<ReturnType<typeof createContext>>;

/** host:port[/name] of DATABASE_URL, never its user or password. */
export function databaseAddress(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    return `${url.hostname}:${url.port || '5432'}${url.pathname.length > 1 ? url.pathname : ''}`;
  } catch {
    return 'DATABASE_URL';
  }
}

export function openForCommand(config: Config, opts: OpenOptions = {}): Promise<CommandContext> {
  return createContext(config, undefined, opts);
}

/**
 * Applies pending migrations, recording the site in a fresh database; failures become one line
 * (unreachable, or a database of the other site: exit 2).
 */
export async function migrateForCommand(ctx: CommandContext): Promise<string[]> {
  try {
    return await migrate(ctx.database, { site: ctx.config.site });
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw commandDatabaseError(ctx.config, err, 'migrations failed');
  }
}

/**
 * The database must already hold this site's tables (a command acting on a served site):
 * a fresh PostgreSQL database means DATABASE_URL is not the server's.
 */
export async function requireExistingSchema(ctx: CommandContext): Promise<void> {
  let rows: Array<{ present: boolean }>;
  try {
    rows = await ctx.database.query<{ present: boolean }>(
      // to_regclass is null for a missing table, without an error.
      sql`select to_regclass('cpd_migrations') is not null as present`,
    );
  } catch (err) {
    throw commandDatabaseError(ctx.config, err, 'cannot read the database');
  }
  if (!rows[0]?.present) {
    const where = ctx.config.databaseUrl ? databaseAddress(ctx.config.databaseUrl) : ctx.config.dataDir;
    throw new FatalError(`the database at ${where} has no cpd tables: is DATABASE_URL the server's? (\`cpd serve\` or \`cpd migrate\` sets a database up)`, 2);
  }
}

export function commandDatabaseError(config: Config, err: unknown, what: string): FatalError {
  if (err instanceof FatalError) return err;
  if (isDatabaseUnreachable(err)) {
    const where = config.databaseUrl ? ` at ${databaseAddress(config.databaseUrl)}` : '';
    return new FatalError(`cannot connect to the database${where}: ${rootMessage(err)}`, 2);
  }
  return new FatalError(`${what}: ${rootMessage(err)}`);
}

/**
 * Applies the embedded migrations in order, inside one transaction holding a PostgreSQL advisory
 * lock, so replicas starting together apply each migration exactly once.
 * Not drizzle's migrator: it reads migrations/ from the filesystem at run time, and the compiled
 * binary has no such folder; ours takes the SQL embedded by migrations.generated.ts.
 */
import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Database } from './client';
import { embeddedMigrations } from './migrations.generated';

export interface Migration {
  name: string;
  sql: string;
}

// Arbitrary but fixed: "cpd" migrate lock.
const MIGRATION_LOCK_KEY = 0x63_70_64_01;

const hashOf = (m: Migration) => createHash('sha256').update(m.sql).digest('hex');

/** PostgreSQL's SQLSTATE of a failed query, drizzle's wrapper or not. */
function sqlState(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | null; e && typeof e === 'object'; e = e.cause as typeof e) {
    if (typeof e.code === 'string') return e.code;
  }
  return undefined;
}

/**
 * Without taking the lock: is every migration already recorded, unchanged? (the usual restart)
 * One query on start-up's path; a database without our table (42P01, undefined_table) is a fresh one.
 */
async function upToDate(database: Database, migrations: Migration[]): Promise<boolean> {
  let rows: Array<{ name: string; hash: string }>;
  try {
    rows = await database.query<{ name: string; hash: string }>(sql`select name, hash from cpd_migrations`);
  } catch (err) {
    if (sqlState(err) === '42P01') return false;
    throw err;
  }
  const done = new Map(rows.map((r) => [r.name, r.hash]));
  return migrations.every((m) => done.get(m.name) === hashOf(m));
}

export async function migrate(database: Database, migrations: Migration[] = embeddedMigrations): Promise<string[]> {
  if (await upToDate(database, migrations)) return [];
  const applied: string[] = [];
  await database.db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
    await tx.execute(sql`create table if not exists cpd_migrations (
      name text primary key, hash text not null, applied_at timestamptz not null default now())`);
    const done = new Map(
      (await database.query<{ name: string; hash: string }>(sql`select name, hash from cpd_migrations`, tx)).map((r) => [
        r.name,
        r.hash,
      ]),
    );
    for (const m of migrations) {
      const hash = hashOf(m);
      const seen = done.get(m.name);
      if (seen !== undefined) {
        if (seen !== hash) throw new Error(`migration ${m.name} was changed after it was applied`);
        continue;
      }
      for (const statement of m.sql.split('--> statement-breakpoint')) {
        if (statement.trim()) await tx.execute(sql.raw(statement));
      }
      await tx.execute(sql`insert into cpd_migrations (name, hash) values (${m.name}, ${hash})`);
      applied.push(m.name);
    }
  });
  return applied;
}

/**
 * Applies the embedded migrations in order, inside one transaction holding a PostgreSQL advisory
 * lock, so replicas starting together apply each migration exactly once.
 * A database belongs to one site: the first migration run with a site records it (table
 * cpd_site, one row), and a run for the other site is refused before anything is applied. Two
 * sites on one database would share sessions, keys and wallets across currencies.
 * Not drizzle's migrator: it reads migrations/ from the filesystem at run time, and the compiled
 * binary has no such folder; ours takes the SQL embedded by migrations.generated.ts.
 */
import { sql } from 'drizzle-orm';
import { ConfigError } from '../errors';
import type { Database } from './client';
import type { Migration } from './migration';
import { embeddedMigrations } from './migrations.generated';
import { sqlState } from './sql-state';

export interface MigrateOptions {
  /** The site of the process: recorded by the first run, refused when another is recorded. */
  site?: string;
  /** Default: the migrations embedded in this binary. */
  migrations?: Migration[];
}

function refuseOtherSite(recorded: string | null, site: string | undefined) {
  if (site !== undefined && recorded !== null && recorded !== site)
    throw new ConfigError('SITE', `this database belongs to the ${recorded} site; a SITE=${site} process may not use it`);
}

// Arbitrary but fixed: "cpd" migrate lock.
const MIGRATION_LOCK_KEY = 0x63_70_64_01;

const hashOf = (m: Migration) => Bun.SHA256.hash(m.sql, 'hex');

/**
 * Without taking the lock: is every migration already recorded, unchanged, and the site too? (the
 * usual restart). One query on start-up's path; a database without our tables (42P01,
 * undefined_table) is a fresh one, or one from before sites were recorded.
 */
async function upToDate(database: Database, migrations: Migration[], site: string | undefined): Promise<boolean> {
  let rows: Array<{ name: string; hash: string; site: string | null }>;
  try {
    rows = await database.query(sql`select name, hash, (select site from cpd_site) as site from cpd_migrations`);
  } catch (err) {
    if (sqlState(err) === '42P01') return false;
    throw err;
  }
  const recorded = rows[0]?.site ?? null;
  refuseOtherSite(recorded, site);
  const done = new Map(rows.map((r) => [r.name, r.hash]));
  return (site === undefined || recorded !== null) && migrations.every((m) => done.get(m.name) === hashOf(m));
}

export async function migrate(database: Database, { site, migrations = embeddedMigrations }: MigrateOptions = {}): Promise<string[]> {
  if (await upToDate(database, migrations, site)) return [];
  const applied: string[] = [];
  await database.db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
    await tx.execute(sql`create table if not exists cpd_migrations (
      name text primary key, hash text not null, applied_at timestamptz not null default now())`);
    await tx.execute(sql`create table if not exists cpd_site (
      one boolean primary key default true check (one), site text not null, recorded_at timestamptz not null default now())`);
    if (site !== undefined) {
      await tx.execute(sql`insert into cpd_site (site) values (${site}) on conflict do nothing`);
      const [row] = await database.query<{ site: string }>(sql`select site from cpd_site`, tx);
      refuseOtherSite(row?.site ?? null, site);
    }
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
